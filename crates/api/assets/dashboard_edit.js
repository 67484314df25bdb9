// plantd console: the dashboard editor (dashboard_edit.js) — place, size and configure widgets and variables, then save the layout with PUT /v1/dashboards/{id}.
(function () {
  'use strict';

  const root = document.getElementById('editor');
  if (!root) return;
  const dashId = root.dataset.dashboardId || '';
  const viewUrl = '/dashboards/' + encodeURIComponent(dashId);
  const errBox = document.getElementById('editor-error');
  const toolbar = document.getElementById('editor-toolbar');
  const grid = document.getElementById('editor-grid');
  const aside = document.getElementById('widget-form');

  const TYPES = { line_chart: 'Line chart', stat: 'Stat', gauge: 'Gauge', table: 'Table', alert_list: 'Alert list', text: 'Text' };
  const SIZES = { line_chart: [6, 4], stat: [2, 2], gauge: [3, 3], table: [4, 4], alert_list: [6, 3], text: [4, 2] };
  // The settings each type uses; the others are neither shown nor sent.
  const USES = {
    line_chart: ['asset', 'tags', 'aggregation', 'range', 'unit', 'decimals', 'minmax', 'thresholds'],
    stat: ['asset', 'tags', 'range', 'unit', 'decimals', 'thresholds'],
    gauge: ['asset', 'tags', 'range', 'unit', 'decimals', 'minmax', 'thresholds'],
    table: ['asset', 'tags', 'range', 'unit', 'decimals', 'thresholds'],
    alert_list: ['asset'],
    text: ['text'],
  };
  const uses = (w, what) => (USES[w.type] || []).includes(what);
  const AGGS = ['avg', 'min', 'max', 'sum', 'count'];
  const RANGES = ['15m', '1h', '6h', '24h', '7d', '30d'];
  const COLORS = ['normal', 'advisory', 'warning', 'critical'];
  const MAX_COLUMNS = 24, MAX_H = 24, MAX_Y = 1000, MAX_TAGS = 8, MAX_THRESHOLDS = 10, MAX_VARIABLES = 10, ROW_PX = 60;
  const NAMES = {                                        // field paths as people read them, for the error list
    name: 'Name', description: 'Description', 'layout.columns': 'Columns', id: 'ID', type: 'Type', title: 'Title',
    x: 'Column (x)', y: 'Row (y)', w: 'Width', h: 'Height', query: 'Query', 'query.asset_id': 'Asset', 'query.tags': 'Tags',
    'query.aggregation': 'Aggregation', 'query.range': 'Range', 'query.data_source_id': 'Data source', 'options.unit': 'Unit',
    'options.decimals': 'Decimals', 'options.min': 'Min', 'options.max': 'Max', 'options.thresholds': 'Thresholds', text: 'Text',
  };

  const doc = { name: '', description: '' };
  const layout = { columns: 12, variables: [], widgets: [] };
  let selected = null;          // id of the widget shown in the form
  let dirty = false, version = 0, saving = null, uid = 0;
  let errs = [];                // {field, message, wid?, rest?}: the last save's problems still standing
  let problem = null;           // {headline, generic}: what #editor-error says above the list
  const cards = new Map();      // widget id -> card element
  const ui = {};

  // ---------- helpers ----------
  function el(tag, props, children) {
    const e = document.createElement(tag);
    let value = null;
    for (const [k, v] of Object.entries(props || {})) {
      if (v == null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'value') value = v;
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of [].concat(children == null ? [] : children)) if (c != null) e.append(c);
    if (value != null) e.value = String(value);
    return e;
  }
  const clamp = (n, lo, hi) => Math.max(lo, Math.min(hi, n));
  const nextId = () => 'ed-' + (++uid);
  const numOrNull = (s) => { if (String(s).trim() === '') return null; const n = Number(s); return Number.isFinite(n) ? n : null; };
  const under = (p, base) => p === base || p.startsWith(base + '.') || p.startsWith(base + '[');
  const parentPath = (p) => { const q = p.replace(/(\[\d+\]|\.[^.[\]]*)$/, ''); return q === p ? '' : q; };
  const byField = (container, path) => container.querySelector('[data-field="' + CSS.escape(path) + '"]');
  const widgetById = (id) => layout.widgets.find((w) => w.id === id);
  const typeName = (t) => TYPES[t] || t;
  const assetIds = () => Array.from(document.querySelectorAll('#asset-list option'), (o) => o.value).filter(Boolean);
  const opts = (list, current) => list.map(([v, t]) => el('option', { value: v, text: t, selected: v === current }));

  // A labelled input with its error line; `path` names it for validation errors.
  function field(label, input, path, hint) {
    if (!input.id) input.id = nextId();
    const err = el('p', { class: 'field-error', id: input.id + '-err' });
    const h = hint ? el('p', { class: 'hint', id: input.id + '-hint', text: hint }) : null;
    input.setAttribute('aria-describedby', (h ? h.id + ' ' : '') + err.id);
    if (path) input.dataset.key = path;
    return el('div', { class: 'field control', 'data-field': path || null }, [el('label', { for: input.id, text: label }), input, h, err]);
  }

  async function api(method, body) {
    const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    let res, json = null;
    try { res = await fetch('/v1/dashboards/' + encodeURIComponent(dashId), init); } catch (e) {
      throw { message: 'Could not reach the server (' + e.message + ').', details: [] };
    }
    try { json = await res.json(); } catch (e) { json = null; }
    if (!res.ok || !json || json.error) {
      const er = (json && json.error) || {};
      throw { status: res.status, message: er.message || 'The server answered HTTP ' + res.status + '.', details: Array.isArray(er.details) ? er.details : [] };
    }
    return json.data;
  }

  // ---------- the model ----------
  function blankWidget(id, type) {
    return { id, type, title: '', x: 0, y: 0, w: 1, h: 1, text: '', raw: {},
      query: { data_source_id: '', asset_id: '', tags: [], aggregation: '', range: '' },
      options: { unit: '', decimals: null, min: null, max: null, thresholds: [] } };
  }
  function load(d) {
    doc.name = d.name || ''; doc.description = d.description || '';
    const l = d.layout || {};
    layout.columns = clamp(Math.round(Number(l.columns) || 12), 1, MAX_COLUMNS);
    layout.variables = (l.variables || []).map((v) => ({ name: v.name || '', label: v.label || '', type: v.type || 'asset',
      default: v.default || '', options: Array.isArray(v.options) ? v.options.map(String) : [] }));
    layout.widgets = (l.widgets || []).map((s) => {
      const w = blankWidget(String(s.id), s.type), q = s.query || {}, o = s.options || {};
      Object.assign(w, { title: s.title || '', x: Number(s.x) || 0, y: Number(s.y) || 0, w: Number(s.w) || 1, h: Number(s.h) || 1, text: s.text || '', raw: s });
      Object.assign(w.query, { data_source_id: q.data_source_id || '', asset_id: q.asset_id || '', tags: (q.tags || []).map(String),
        aggregation: q.aggregation || '', range: q.range || '' });
      Object.assign(w.options, { unit: o.unit || '', decimals: o.decimals ?? null, min: o.min ?? null, max: o.max ?? null,
        thresholds: (o.thresholds || []).map((t) => ({ value: t.value ?? null, color: t.color || 'normal' })) });
      return w;
    });
  }
  // What is sent: only the fields that are set and that the widget's type uses.
  function cleanWidget(w) {
    const out = { id: w.id, type: w.type, title: w.title, x: w.x, y: w.y, w: w.w, h: w.h };
    if (!USES[w.type]) { for (const k of ['query', 'options', 'text']) if (w.raw[k] != null) out[k] = w.raw[k]; return out; }
    if (w.type === 'text') { out.text = w.text; return out; }
    const q = {}, s = w.query, o = {}, p = w.options;
    if (s.data_source_id && w.type !== 'alert_list') q.data_source_id = s.data_source_id;
    if (s.asset_id.trim()) q.asset_id = s.asset_id.trim();
    if (uses(w, 'tags') && s.tags.length) q.tags = s.tags.slice();
    if (uses(w, 'aggregation') && s.aggregation) q.aggregation = s.aggregation;
    if (uses(w, 'range') && s.range) q.range = s.range;
    if (w.type !== 'alert_list' || q.asset_id) out.query = q;
    if (uses(w, 'unit') && p.unit.trim()) o.unit = p.unit.trim();
    if (uses(w, 'decimals') && p.decimals != null) o.decimals = p.decimals;
    if (uses(w, 'minmax') && p.min != null) o.min = p.min;
    if (uses(w, 'minmax') && p.max != null) o.max = p.max;
    if (uses(w, 'thresholds') && p.thresholds.length) o.thresholds = p.thresholds.map((t) => ({ value: t.value, color: t.color }));
    if (Object.keys(o).length) out.options = o;
    return out;
  }
  function model() {
    return {
      columns: layout.columns,
      variables: layout.variables.map((v) => {
        const o = { name: v.name.trim() };
        if (v.label.trim()) o.label = v.label.trim();
        o.type = v.type || 'asset'; o.default = v.default.trim();
        if (v.options.length) o.options = v.options.slice();
        return o;
      }),
      widgets: layout.widgets.map(cleanWidget),
    };
  }
  // Problems the server could not name by field (numbers JSON cannot carry) are caught here.
  function precheck(m) {
    const out = [];
    m.widgets.forEach((w, i) => {
      const o = w.options, p = 'layout.widgets[' + i + '].options';
      if (!o) return;
      if (o.decimals != null && !(Number.isInteger(o.decimals) && o.decimals >= 0 && o.decimals <= 6)) out.push({ field: p + '.decimals', message: 'must be a whole number from 0 to 6' });
      (o.thresholds || []).forEach((t, k) => {
        if (typeof t.value !== 'number' || !Number.isFinite(t.value)) out.push({ field: p + '.thresholds[' + k + '].value', message: 'must be a number' });
      });
    });
    return out;
  }

  function markDirty() {
    dirty = true; version++;
    if (ui.saved) ui.saved.hidden = true;
  }
  function announce(text) { if (ui.status) ui.status.textContent = text; }
  function bottomRow() { return layout.widgets.reduce((m, w) => Math.max(m, w.y + w.h), 0); }
  function moveTo(w, x, y) { w.x = clamp(x, 0, layout.columns - w.w); w.y = clamp(y, 0, MAX_Y); }
  function resizeTo(w, ww, hh) { w.w = clamp(ww, 1, layout.columns - w.x); w.h = clamp(hh, 1, MAX_H); }
  function fit(w) { w.w = clamp(w.w, 1, layout.columns); w.h = clamp(w.h, 1, MAX_H); moveTo(w, w.x, w.y); }
  function where(w) { return 'column ' + (w.x + 1) + ', row ' + (w.y + 1) + ', ' + w.w + ' wide by ' + w.h + ' high'; }
  function defaultAsset() { return layout.variables.length ? '$' + layout.variables[0].name : (assetIds()[0] || ''); }

  // The tag suggestions for an asset (or a variable's default asset).
  function tagListId(asset) {
    let a = (asset || '').trim();
    if (a.startsWith('$')) { const v = layout.variables.find((x) => x.name === a.slice(1)); a = v ? v.default : ''; }
    for (const d of document.querySelectorAll('datalist.tag-list')) if (d.dataset.asset === a) return d.id;
    return null;
  }
  // Suggestions for the asset field: the declared variables, then the assets.
  function refreshAssetChoices() {
    let dl = document.getElementById('editor-assets');
    if (!dl) { dl = el('datalist', { id: 'editor-assets' }); root.append(dl); }
    dl.textContent = '';
    for (const v of layout.variables) if (v.name) dl.append(el('option', { value: '$' + v.name, label: 'Variable: ' + (v.label || v.name) }));
    for (const a of assetIds()) dl.append(el('option', { value: a }));
  }

  // ---------- errors ----------
  function describe(path) {
    if (NAMES[path]) return NAMES[path];
    const m = /^layout\.variables\[(\d+)\]\.?(.*)$/.exec(path);
    if (m) return 'Variable ' + (Number(m[1]) + 1) + (m[2] ? ' ' + m[2] : '');
    return path;
  }
  function setErrors(details, ids, headline, generic) {
    errs = (details || []).map((d) => {
      const f = String(d.field || ''), m = /^layout\.widgets\[(\d+)\](?:\.(.+))?$/.exec(f);
      const e = { field: f, message: String(d.message || 'is not valid') };
      if (m && ids[Number(m[1])] != null) { e.wid = ids[Number(m[1])]; e.rest = m[2] || ''; }
      return e;
    });
    problem = headline ? { headline, generic: !!generic } : null;
    const first = errs.find((e) => e.wid);
    if (first) selected = first.wid;
    if (errs.some((e) => !e.wid && e.field.startsWith('layout.variables'))) ui.varPanel.hidden = false;
    renderToolbarErrors(); renderVariables(); renderGrid(); renderForm(); renderErrorBox();
  }
  function renderErrorBox() {
    errBox.textContent = '';
    if (!problem || (!errs.length && !problem.generic)) { errBox.hidden = true; return; }
    errBox.append(el('span', { text: problem.headline }));
    for (const e of errs) {
      const item = el('span', { class: 'error-item' });
      item.style.display = 'block';
      const w = e.wid && widgetById(e.wid);
      if (w) {
        item.append(el('button', { type: 'button', class: 'link', text: 'Widget ' + w.id + (w.title ? ' \u201c' + w.title + '\u201d' : ''),
          on: { click: () => { select(w.id); focusField(e.rest); } } }), ': ');
        item.append((e.rest ? describe(e.rest) + ' ' : '') + e.message);
      } else item.append((e.field ? describe(e.field) + ' ' : '') + e.message);
      errBox.append(item);
    }
    errBox.hidden = false;
  }
  // Shows each error beside the closest input that names its path (or in the container's general line).
  function applyErrors(container, list, key) {
    const general = container.querySelector('.form-error.general');
    for (const e of list) {
      const full = e[key] || '';
      let p = full, wrap = null;
      while (p && !(wrap = byField(container, p))) p = parentPath(p);
      let msg = e.message;
      if (wrap && p !== full) {
        const rest = full.slice(p.length).replace(/^\./, ''), k = /^\[(\d+)\]/.exec(rest), w = e.wid && widgetById(e.wid);
        msg = (k && w && p === 'query.tags' && w.query.tags[Number(k[1])] != null ? 'Tag \u201c' + w.query.tags[Number(k[1])] + '\u201d'
          : k ? 'Item ' + (Number(k[1]) + 1) + rest.slice(k[0].length) : rest) + ': ' + msg;
      } else if (!wrap && full) msg = describe(full) + ' ' + msg;
      const target = wrap ? wrap.querySelector(':scope > .field-error') : general;
      if (!target) continue;
      target.textContent = target.textContent ? target.textContent + '; ' + msg : msg;
      const input = wrap && wrap.querySelector(':scope > input, :scope > select, :scope > textarea');
      if (input) input.setAttribute('aria-invalid', 'true');
    }
  }
  // An edited field's errors go away (until the next save).
  function clearErrorsAt(wid, path) {
    const n = errs.length;
    errs = errs.filter((e) => !(wid ? e.wid === wid && under(e.rest, path) : !e.wid && under(e.field, path)));
    if (errs.length === n) return;
    const wrap = byField(wid ? aside : toolbar, path);
    if (wrap) {
      const p = wrap.querySelector(':scope > .field-error');
      if (p) p.textContent = '';
      wrap.querySelectorAll('[aria-invalid]').forEach((x) => x.removeAttribute('aria-invalid'));
    }
    if (wid && widgetById(wid)) updateCard(widgetById(wid));
    renderErrorBox();
  }
  function renderToolbarErrors() {
    for (const p of toolbar.querySelectorAll(':scope > .control > .field-error')) p.textContent = '';
    for (const i of toolbar.querySelectorAll(':scope > .control > [aria-invalid]')) i.removeAttribute('aria-invalid');
    applyErrors(toolbar, errs.filter((e) => !e.wid && !e.field.startsWith('layout.variables')), 'field');
  }
  function focusField(path) {
    let p = path || '', t = null;
    while (p && !(t = aside.querySelector('[data-key="' + CSS.escape(p) + '"]'))) p = parentPath(p);
    (t || aside.querySelector('input, select, textarea') || aside).focus();
  }

  // ---------- toolbar ----------
  function renderToolbar() {
    toolbar.textContent = '';
    toolbar.classList.add('dash-toolbar');
    const name = el('input', { type: 'text', required: true, maxlength: 200, value: doc.name,
      on: { input: (e) => { doc.name = e.target.value; markDirty(); clearErrorsAt(null, 'name'); } } });
    const desc = el('input', { type: 'text', maxlength: 2000, value: doc.description,
      on: { input: (e) => { doc.description = e.target.value; markDirty(); clearErrorsAt(null, 'description'); } } });
    ui.columns = el('input', { type: 'number', min: 1, max: MAX_COLUMNS, step: 1, value: layout.columns,
      on: { change: (e) => setColumns(parseInt(e.target.value, 10)) } });
    ui.newType = el('select', { id: 'editor-new-type' }, opts(Object.entries(TYPES), 'line_chart'));
    ui.add = el('button', { type: 'button', text: 'Add widget', on: { click: () => addWidget(ui.newType.value) } });
    ui.varToggle = el('button', { type: 'button', 'aria-expanded': 'false', 'aria-controls': 'editor-variables',
      on: { click: () => { ui.varPanel.hidden = !ui.varPanel.hidden; renderVariables(); } } });
    ui.save = el('button', { type: 'button', class: 'primary', text: 'Save', on: { click: () => { save(); } } });
    ui.status = el('span', { role: 'status', 'aria-live': 'polite', class: 'hint' });
    ui.saved = el('span', { hidden: true }, ['Saved. ', el('a', { href: viewUrl, text: 'View the dashboard' })]);
    ui.saved.setAttribute('role', 'status');
    ui.varPanel = el('div', { id: 'editor-variables', hidden: true });
    const help = el('p', { class: 'hint', id: 'editor-help', text: 'Drag a widget to move it and its corner to resize it. '
      + 'With the keyboard: Tab to a widget; arrow keys move it, Shift+arrow keys resize it, Enter edits its settings, Delete removes it.' });
    for (const n of [ui.varPanel, help]) n.style.flexBasis = '100%';
    const addRow = el('span', null, [ui.newType, ui.add]);
    Object.assign(addRow.style, { display: 'flex', gap: '0.4rem' });
    const addBox = el('div', { class: 'control' }, [el('label', { for: ui.newType.id, text: 'New widget type' }), addRow]);
    toolbar.append(field('Name', name, 'name'), field('Description', desc, 'description'),
      field('Columns', ui.columns, 'layout.columns'), addBox,
      el('div', { class: 'control' }, [ui.varToggle]), el('div', { class: 'control actions' }, [ui.save,
        el('a', { class: 'button', href: viewUrl, text: 'Cancel' }), ui.saved, ui.status]), ui.varPanel, help);
    renderVariables();
  }
  function setColumns(n) {
    if (!Number.isFinite(n)) { ui.columns.value = layout.columns; return; }
    layout.columns = clamp(n, 1, MAX_COLUMNS);
    ui.columns.value = layout.columns;
    layout.widgets.forEach(fit);
    markDirty(); clearErrorsAt(null, 'layout.columns');
    renderGrid(); renderForm();
    announce('The grid has ' + layout.columns + ' columns.');
  }

  function renderVariables() {
    const panel = ui.varPanel;
    if (!panel) return;
    ui.varToggle.textContent = 'Variables (' + layout.variables.length + ')';
    ui.varToggle.setAttribute('aria-expanded', String(!panel.hidden));
    panel.textContent = '';
    if (panel.hidden) return;
    const fs = el('fieldset', { 'data-field': 'layout.variables' }, [el('legend', { text: 'Variables' }),
      el('p', { class: 'hint', text: 'An asset variable lets viewers switch the asset of the widgets whose asset is $name.' }),
      el('p', { class: 'field-error' })]);
    layout.variables.forEach((v, i) => {
      const base = 'layout.variables[' + i + ']';
      const edit = (key, fn) => (e) => { fn(e.target.value); markDirty(); clearErrorsAt(null, base + '.' + key); refreshAssetChoices(); };
      let before = v.name;
      const name = el('input', { type: 'text', maxlength: 32, pattern: '[A-Za-z][A-Za-z0-9_]*', value: v.name, on: {
        focus: () => { before = v.name; },
        input: edit('name', (x) => { v.name = x.trim(); }),
        change: () => {                                  // widgets that used the old name follow the rename
          if (before && before !== v.name && !layout.variables.some((o) => o !== v && o.name === before)) {
            for (const w of layout.widgets) if (w.query.asset_id === '$' + before) { w.query.asset_id = '$' + v.name; updateCard(w); }
            renderForm();
          }
          before = v.name; ui.varToggle.textContent = 'Variables (' + layout.variables.length + ')';
        } } });
      const label = el('input', { type: 'text', maxlength: 64, value: v.label, on: { input: edit('label', (x) => { v.label = x; }) } });
      const def = el('input', { type: 'text', list: 'asset-list', value: v.default, on: { input: edit('default', (x) => { v.default = x; }) } });
      const options = el('input', { type: 'text', value: v.options.join(', '), on: {
        input: edit('options', (x) => { v.options = x.split(',').map((s) => s.trim()).filter(Boolean); }) } });
      const row = el('fieldset', null, [el('legend', { text: 'Variable ' + (i + 1) + (v.name ? ' ($' + v.name + ')' : '') }),
        field('Name', name, base + '.name', 'Letters, digits or _; widgets use it as $name.'), field('Label', label, base + '.label'),
        field('Default asset', def, base + '.default'), field('Options (comma-separated assets; empty: any)', options, base + '.options'),
        el('button', { type: 'button', class: 'small danger', text: 'Remove variable ' + (i + 1), on: { click: () => {
          layout.variables.splice(i, 1);
          errs = errs.filter((e) => e.wid || !e.field.startsWith('layout.variables'));
          markDirty(); refreshAssetChoices(); renderVariables(); renderErrorBox(); renderForm();
          ui.varToggle.focus(); announce('Variable removed.');
        } } })]);
      row.style.display = 'flex'; row.style.flexWrap = 'wrap'; row.style.gap = '0 1rem'; row.style.alignItems = 'flex-end';
      fs.append(row);
    });
    fs.append(el('button', { type: 'button', text: 'Add variable', disabled: layout.variables.length >= MAX_VARIABLES, on: { click: () => {
      let n = layout.variables.length + 1;
      while (layout.variables.some((v) => v.name === 'var' + n)) n++;
      const a = assetIds();
      layout.variables.push({ name: layout.variables.length ? 'var' + n : 'asset', label: '', type: 'asset', default: a[0] || '', options: [] });
      errs = errs.filter((e) => e.wid || !e.field.startsWith('layout.variables'));
      markDirty(); refreshAssetChoices(); renderVariables(); renderErrorBox();
      const inputs = panel.querySelectorAll('input');
      if (inputs.length) inputs[inputs.length - 4].focus();
    } } }));
    panel.append(fs);
    applyErrors(panel, errs.filter((e) => !e.wid && e.field.startsWith('layout.variables')), 'field');
  }

  // ---------- the grid ----------
  function summary(w) {
    if (w.type === 'text') return w.text.length > 80 ? w.text.slice(0, 80) + '\u2026' : w.text;
    if (w.type === 'alert_list') return 'Alerts of ' + (w.query.asset_id || 'all assets');
    return (w.query.asset_id || '(no asset)') + ': ' + (w.query.tags.join(', ') || '(no tags)');
  }
  function makeCard(w) {
    const parts = { title: el('h3'), sub: el('span', { class: 'sub' }), info: el('p', { class: 'note' }), pos: el('p', { class: 'note' }),
      mark: el('span', { 'aria-hidden': 'true' }), handle: el('span', { class: 'resize-handle', title: 'Drag to resize', 'aria-hidden': 'true' }) };
    const c = el('div', { class: 'widget editor-card', tabindex: 0, role: 'button', 'aria-roledescription': 'widget',
      'aria-describedby': 'editor-help', 'data-widget-id': w.id },
    [el('header', null, [parts.title, parts.sub]), el('div', { class: 'body' }, [parts.info, parts.pos]), parts.mark, parts.handle]);
    c.parts = parts;
    Object.assign(c.style, { position: 'relative', cursor: 'grab', touchAction: 'none', userSelect: 'none' });
    Object.assign(parts.mark.style, { position: 'absolute', inset: '0', border: '3px solid var(--text)', pointerEvents: 'none' });
    Object.assign(parts.handle.style, { position: 'absolute', right: '2px', bottom: '2px', width: '14px', height: '14px',
      cursor: 'nwse-resize', touchAction: 'none', borderRight: '4px solid var(--control-border)', borderBottom: '4px solid var(--control-border)' });
    c.addEventListener('pointerdown', (e) => drag(e, w.id, 'move'));
    parts.handle.addEventListener('pointerdown', (e) => drag(e, w.id, 'resize'));
    c.addEventListener('keydown', (e) => onCardKey(e, w.id));
    return c;
  }
  function updateCard(w) {
    const c = cards.get(w.id);
    if (!c) return;
    const p = c.parts, bad = errs.some((e) => e.wid === w.id), sel = w.id === selected;
    c.style.gridColumn = (w.x + 1) + ' / span ' + w.w;
    c.style.gridRow = (w.y + 1) + ' / span ' + w.h;
    c.style.setProperty('--h', String(w.h));
    p.title.textContent = w.title || '(untitled)';
    p.sub.textContent = typeName(w.type) + ' \u00b7 ' + w.id;
    p.info.textContent = summary(w);
    p.pos.textContent = 'x ' + w.x + ', y ' + w.y + ', ' + w.w + '\u00d7' + w.h;
    p.mark.hidden = !sel;
    c.classList.toggle('abnormal-critical', bad);
    c.classList.toggle('invalid', bad);
    c.classList.toggle('selected', sel);
    c.setAttribute('aria-current', sel ? 'true' : 'false');
    c.setAttribute('aria-label', typeName(w.type) + ' widget ' + (w.title ? '\u201c' + w.title + '\u201d' : w.id) + ', ' + where(w)
      + (sel ? ', selected' : '') + (bad ? ', has errors' : ''));
  }
  function renderGrid() {
    grid.style.setProperty('--columns', String(layout.columns));
    grid.style.gridAutoRows = ROW_PX + 'px';
    grid.style.gridTemplateRows = 'repeat(' + (bottomRow() + 2) + ', ' + ROW_PX + 'px)';
    const seen = new Set();
    for (const w of layout.widgets) {
      seen.add(w.id);
      if (!cards.has(w.id)) cards.set(w.id, makeCard(w));
      updateCard(w);
    }
    for (const [id, c] of cards) if (!seen.has(id)) { c.remove(); cards.delete(id); }
    // DOM (and so Tab) order follows the visual order: by row, then column.
    const order = layout.widgets.slice().sort((a, b) => a.y - b.y || a.x - b.x).map((w) => cards.get(w.id));
    const now = Array.from(grid.children).filter((n) => n.classList.contains('editor-card'));
    if (order.some((c, i) => now[i] !== c)) {
      const focused = document.activeElement;
      for (const c of order) grid.append(c);
      if (focused && order.includes(focused) && document.activeElement !== focused) focused.focus();
    }
    let empty = grid.querySelector(':scope > .editor-empty');
    if (!layout.widgets.length && !empty) {
      empty = el('p', { class: 'hint editor-empty', text: 'No widgets yet: choose a type and press \u201cAdd widget\u201d.' });
      empty.style.gridColumn = '1 / -1';
      grid.append(empty);
    } else if (layout.widgets.length && empty) empty.remove();
  }
  function cellSize() {
    const cs = getComputedStyle(grid), gx = parseFloat(cs.columnGap) || 0, gy = parseFloat(cs.rowGap) || 0;
    const inner = grid.clientWidth - (parseFloat(cs.paddingLeft) || 0) - (parseFloat(cs.paddingRight) || 0);
    return { x: Math.max(1, (inner - gx * (layout.columns - 1)) / layout.columns + gx), y: ROW_PX + gy };
  }
  // Pointer drags: the card moves, its corner handle resizes; both snap to whole cells.
  function drag(e, id, mode) {
    const w = widgetById(id), c = cards.get(id);
    if (!w || !c || e.button !== 0 || (mode === 'move' && e.target === c.parts.handle)) return;
    e.preventDefault(); e.stopPropagation();
    const target = e.currentTarget, cell = cellSize(), start = { x: w.x, y: w.y, w: w.w, h: w.h, px: e.clientX, py: e.clientY };
    let moved = false;
    try { target.setPointerCapture(e.pointerId); } catch (err) { /* capture is only a nicety */ }
    c.style.zIndex = '2'; c.style.opacity = '0.85';
    const move = (ev) => {
      if (!moved && Math.abs(ev.clientX - start.px) + Math.abs(ev.clientY - start.py) < 4) return;
      moved = true;
      const dc = Math.round((ev.clientX - start.px) / cell.x), dr = Math.round((ev.clientY - start.py) / cell.y);
      if (mode === 'move') moveTo(w, start.x + dc, start.y + dr); else resizeTo(w, start.w + dc, start.h + dr);
      updateCard(w);
      grid.style.gridTemplateRows = 'repeat(' + (bottomRow() + 2) + ', ' + ROW_PX + 'px)';
    };
    const end = () => {
      target.removeEventListener('pointermove', move); target.removeEventListener('pointerup', end); target.removeEventListener('pointercancel', end);
      c.style.zIndex = ''; c.style.opacity = '';
      if (moved && (w.x !== start.x || w.y !== start.y || w.w !== start.w || w.h !== start.h)) geometryChanged(w, mode === 'move' ? 'Moved' : 'Resized');
      if (!moved || selected !== w.id) select(w.id);
      c.focus();
    };
    target.addEventListener('pointermove', move); target.addEventListener('pointerup', end); target.addEventListener('pointercancel', end);
  }
  function geometryChanged(w, verb) {
    markDirty();
    for (const k of ['x', 'y', 'w', 'h']) clearErrorsAt(w.id, k);
    renderGrid();
    if (w.id === selected && ui.geo) for (const k of ['x', 'y', 'w', 'h']) ui.geo[k].value = w[k];
    announce(verb + ': ' + where(w) + '.');
  }
  function onCardKey(e, id) {
    const w = widgetById(id);
    if (!w || e.target !== cards.get(id) || e.altKey || e.ctrlKey || e.metaKey) return;
    const d = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
    if (d) {
      e.preventDefault();
      const before = [w.x, w.y, w.w, w.h].join();
      if (e.shiftKey) resizeTo(w, w.w + d[0], w.h + d[1]); else moveTo(w, w.x + d[0], w.y + d[1]);
      if ([w.x, w.y, w.w, w.h].join() !== before) geometryChanged(w, e.shiftKey ? 'Resized' : 'Moved');
      else announce('At the edge of the grid: ' + where(w) + '.');
    } else if (e.key === 'Enter' || e.key === ' ') {
      e.preventDefault(); select(w.id); focusField('title');
    } else if (e.key === 'Delete' || e.key === 'Backspace') {
      e.preventDefault(); removeWidget(w.id);
    }
  }

  // ---------- adding, removing, selecting ----------
  function addWidget(type) {
    let n = 1;
    while (layout.widgets.some((w) => w.id === 'w' + n)) n++;
    const w = blankWidget('w' + n, type), size = SIZES[type] || [4, 3];
    w.w = Math.min(size[0], layout.columns); w.h = size[1]; w.x = 0; w.y = Math.min(bottomRow(), MAX_Y);
    if (type !== 'text') w.query.asset_id = defaultAsset();
    layout.widgets.push(w);
    markDirty(); renderGrid(); select(w.id);
    const c = cards.get(w.id);
    c.focus(); if (c.scrollIntoView) c.scrollIntoView({ block: 'nearest' });
    announce('Added ' + typeName(type) + ' widget ' + w.id + ' at ' + where(w) + '. Its settings are beside the grid.');
    return w;
  }
  function removeWidget(id) {
    const i = layout.widgets.findIndex((w) => w.id === id), w = layout.widgets[i];
    if (!w || !window.confirm('Delete the ' + typeName(w.type).toLowerCase() + ' widget ' + (w.title ? '\u201c' + w.title + '\u201d' : w.id) + '?')) return false;
    const order = Array.from(grid.querySelectorAll(':scope > .editor-card')), at = order.indexOf(cards.get(id));
    layout.widgets.splice(i, 1);
    errs = errs.filter((e) => e.wid !== id);
    if (selected === id) selected = null;
    markDirty(); renderGrid(); renderForm(); renderErrorBox();
    const rest = order.filter((c) => c !== order[at]);
    (rest[Math.min(at, rest.length - 1)] || ui.add).focus();
    announce('Widget ' + id + ' deleted.');
    return true;
  }
  function select(id) {
    const was = selected;
    selected = id;
    for (const w of layout.widgets) if (w.id === id || w.id === was) updateCard(w);
    if (was !== id) renderForm();
  }

  // ---------- the settings form ----------
  function renderForm() {
    const w = widgetById(selected);
    const active = aside.contains(document.activeElement) ? document.activeElement.dataset.key : null;
    aside.textContent = '';
    ui.geo = null;
    aside.append(el('h2', { text: w ? 'Widget ' + w.id : 'Widget settings' }));
    if (!w) {
      aside.append(el('p', { class: 'hint', text: layout.widgets.length
        ? 'Select a widget (click it, or Tab to it and press Enter) to edit its settings.' : 'Add a widget with the toolbar.' }));
      return;
    }
    const f = el('form', { novalidate: true, on: { submit: (e) => e.preventDefault() } });
    // Updates the model from an input; `again` redraws the form (fields depend on it).
    const on = (path, fn, again) => (e) => {
      fn(e.target.value, e.target);
      markDirty(); clearErrorsAt(w.id, path); updateCard(w);
      if (again) renderForm();
    };
    f.append(el('p', { class: 'form-error general', role: 'alert' }));
    f.append(field('ID', el('input', { type: 'text', readonly: true, value: w.id }), 'id'));
    const type = el('select', { on: { change: on('type', (v) => {
      w.type = v;
      if (v !== 'text' && !w.query.asset_id && v !== 'alert_list') w.query.asset_id = defaultAsset();
      fit(w); renderGrid();
    }, true) } }, opts(Object.entries(TYPES), w.type));
    if (!TYPES[w.type]) type.append(el('option', { value: w.type, text: w.type, selected: true }));
    f.append(field('Type', type, 'type'));
    f.append(field('Title', el('input', { type: 'text', maxlength: 200, value: w.title, on: { input: on('title', (v) => { w.title = v; }) } }), 'title'));

    const geo = el('fieldset', null, [el('legend', { text: 'Position and size' })]);
    ui.geo = {};
    const limits = { x: [0, layout.columns - 1, 'Column (x)'], y: [0, MAX_Y, 'Row (y)'], w: [1, layout.columns, 'Width (cols)'], h: [1, MAX_H, 'Height (rows)'] };
    for (const k of ['x', 'y', 'w', 'h']) {
      const input = el('input', { type: 'number', min: limits[k][0], max: limits[k][1], step: 1, value: w[k], on: { change: (e) => {
        const n = parseInt(e.target.value, 10);
        if (Number.isFinite(n)) { if (k === 'x' || k === 'y') moveTo(w, k === 'x' ? n : w.x, k === 'y' ? n : w.y); else resizeTo(w, k === 'w' ? n : w.w, k === 'h' ? n : w.h); }
        e.target.value = w[k];
        geometryChanged(w, k === 'x' || k === 'y' ? 'Moved' : 'Resized');
      } } });
      ui.geo[k] = input;
      geo.append(field(limits[k][2], input, k));
    }
    Object.assign(geo.style, { display: 'grid', gridTemplateColumns: '1fr 1fr', gap: '0 0.6rem' });
    f.append(geo);

    if (uses(w, 'asset')) {
      const asset = el('input', { type: 'text', list: 'editor-assets', autocomplete: 'off', value: w.query.asset_id, on: { input: on('query.asset_id', (v) => {
        w.query.asset_id = v;
        const t = f.querySelector('[data-key="query.tags"]'), id = tagListId(v);
        if (t) { if (id) t.setAttribute('list', id); else t.removeAttribute('list'); }
      }) } });
      f.append(field('Asset', asset, 'query.asset_id', w.type === 'alert_list'
        ? 'Optional: leave empty for the alerts of all assets.' : 'An asset id, or a variable such as $' + ((layout.variables[0] || {}).name || 'pump') + '.'));
    }
    if (uses(w, 'tags')) f.append(tagsField(w, on));
    if (uses(w, 'aggregation')) {
      f.append(field('Aggregation', el('select', { on: { change: on('query.aggregation', (v) => { w.query.aggregation = v; }) } },
        opts([['', 'Default (avg)']].concat(AGGS.map((a) => [a, a])), w.query.aggregation)), 'query.aggregation'));
    }
    if (uses(w, 'range')) {
      const list = [['', 'Default (1h)']].concat(RANGES.map((r) => [r, 'Last ' + r]));
      if (w.query.range && !RANGES.includes(w.query.range)) list.push([w.query.range, 'Last ' + w.query.range]);
      f.append(field('Range', el('select', { on: { change: on('query.range', (v) => { w.query.range = v; }) } }, opts(list, w.query.range)), 'query.range'));
    }
    if (uses(w, 'unit')) f.append(field('Unit', el('input', { type: 'text', maxlength: 16, value: w.options.unit, on: { input: on('options.unit', (v) => { w.options.unit = v; }) } }), 'options.unit'));
    if (uses(w, 'decimals')) {
      f.append(field('Decimals', el('input', { type: 'number', min: 0, max: 6, step: 1, value: w.options.decimals ?? '',
        on: { input: on('options.decimals', (v) => { w.options.decimals = numOrNull(v); }) } }), 'options.decimals', '0 to 6; empty: automatic.'));
    }
    if (uses(w, 'minmax')) {
      for (const k of ['min', 'max']) {
        f.append(field(k === 'min' ? 'Min' : 'Max', el('input', { type: 'number', step: 'any', value: w.options[k] ?? '',
          on: { input: on('options.' + k, (v) => { w.options[k] = numOrNull(v); }) } }), 'options.' + k));
      }
    }
    if (uses(w, 'thresholds')) f.append(thresholdsField(w, on));
    if (uses(w, 'text')) {
      f.append(field('Text', el('textarea', { maxlength: 10000, rows: 5, value: w.text, on: { input: on('text', (v) => { w.text = v; }) } }), 'text'));
    }
    f.append(el('div', { class: 'actions' }, [el('button', { type: 'button', class: 'danger', text: 'Delete widget', 'data-key': 'delete',
      on: { click: () => removeWidget(w.id) } })]));
    aside.append(f);
    applyErrors(f, errs.filter((e) => e.wid === w.id), 'rest');
    if (active) { const t = f.querySelector('[data-key="' + CSS.escape(active) + '"]'); if (t) t.focus(); }
  }

  function tagsField(w, on) {
    const tags = w.query.tags, listId = tagListId(w.query.asset_id);
    const input = el('input', { type: 'text', id: nextId(), list: listId, autocomplete: 'off', 'data-key': 'query.tags', disabled: tags.length >= MAX_TAGS });
    const add = () => {
      const v = input.value.trim();
      input.value = '';
      if (!v || tags.includes(v) || tags.length >= MAX_TAGS) return;
      on('query.tags', () => { tags.push(v); }, true)({ target: input });
      announce('Tag ' + v + ' added.');
      if (tags.length === 1) tagDefaults(w, v);
    };
    input.addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); add(); } });
    input.addEventListener('change', add);
    const list = el('ul', { class: 'tag-chips', 'aria-label': 'Tags of widget ' + w.id });
    Object.assign(list.style, { listStyle: 'none', padding: '0', margin: '0 0 0.3rem', display: 'flex', flexWrap: 'wrap', gap: '0.3rem' });
    tags.forEach((t, i) => {
      const chip = el('li', { class: 'tag-chip' });
      Object.assign(chip.style, { border: '1px solid var(--border)', background: 'var(--surface-2)', borderRadius: 'var(--radius)', padding: '0.05rem 0.2rem 0.05rem 0.45rem' });
      list.append(chip);
      chip.append(t + ' ', el('button', { type: 'button', class: 'small', text: '\u00d7', 'aria-label': 'Remove tag ' + t,
        'data-key': 'query.tags.remove', on: { click: (e) => {
          on('query.tags', () => { tags.splice(i, 1); }, true)(e);
          announce('Tag ' + t + ' removed.');
          const next = aside.querySelector('[data-key="query.tags.remove"]') || aside.querySelector('[data-key="query.tags"]');
          if (next) next.focus();
        } } }));
    });
    if (!tags.length) list.append(el('li', { class: 'hint', text: 'No tags yet.' }));
    const hint = el('p', { class: 'hint', id: input.id + '-hint', text: 'Type or pick a tag and press Enter; up to ' + MAX_TAGS + ' tags.'
      + (w.type === 'stat' || w.type === 'gauge' ? ' A ' + typeName(w.type).toLowerCase() + ' shows the first.' : '') });
    const err = el('p', { class: 'field-error', id: input.id + '-err' });
    input.setAttribute('aria-describedby', hint.id + ' ' + err.id);
    const btn = el('button', { type: 'button', class: 'small', text: 'Add tag', 'data-key': 'query.tags.add', disabled: tags.length >= MAX_TAGS, on: { click: add } });
    return el('div', { class: 'field', 'data-field': 'query.tags' }, [el('label', { for: input.id, text: 'Tags (' + tags.length + ' of ' + MAX_TAGS + ')' }),
      list, input, el('span', null, [btn]), hint, err]);
  }

  // A widget's first tag brings what the tag says it measures (GET /v1/assets/{asset}/tags/{tag}):
  // its unit, and its engineering range as min and max, where the widget has none of its own.
  async function tagDefaults(w, tag) {
    const asset = w.query.asset_id;
    if (!asset || asset.startsWith('$')) return;
    let d;
    try {
      const res = await fetch('/v1/assets/' + encodeURIComponent(asset) + '/tags/' + encodeURIComponent(tag),
        { credentials: 'same-origin', headers: { Accept: 'application/json' } });
      if (!res.ok) return;
      d = (await res.json()).data;
    } catch (e) { return; }
    if (!d || w.query.asset_id !== asset || w.query.tags[0] !== tag) return;
    const took = [];
    if (uses(w, 'unit') && !w.options.unit && d.unit && d.unit.length <= 16) { w.options.unit = d.unit; took.push('unit ' + d.unit); }
    if (uses(w, 'minmax') && d.eu_range && w.options.min == null && w.options.max == null) {
      w.options.min = d.eu_range.low; w.options.max = d.eu_range.high;
      took.push('range ' + d.eu_range.low + ' to ' + d.eu_range.high);
    }
    if (!took.length) return;
    markDirty(); updateCard(w);
    if (selected === w.id) renderForm();
    announce('From the tag\u2019s description: ' + took.join(', ') + '.');
  }

  function thresholdsField(w, on) {
    const th = w.options.thresholds;
    const fs = el('fieldset', { 'data-field': 'options.thresholds' }, [el('legend', { text: 'Thresholds' }),
      el('p', { class: 'hint', text: 'In ascending order: from each value up, values are shown in its colour.' }), el('p', { class: 'field-error' })]);
    th.forEach((t, i) => {
      const base = 'options.thresholds[' + i + ']';
      const value = el('input', { type: 'number', step: 'any', value: t.value ?? '', on: { input: on(base + '.value', (v) => { t.value = numOrNull(v); }) } });
      const colors = COLORS.map((c) => [c, c]);
      if (!COLORS.includes(t.color)) colors.push([t.color, t.color]);
      const color = el('select', { on: { change: on(base + '.color', (v) => { t.color = v; }) } }, opts(colors, t.color));
      const row = el('div', { class: 'threshold' }, [field('Threshold ' + (i + 1) + ' value', value, base + '.value'),
        field('Threshold ' + (i + 1) + ' colour', color, base + '.color'),
        el('button', { type: 'button', class: 'small', text: 'Remove', 'aria-label': 'Remove threshold ' + (i + 1), 'data-key': base + '.remove',
          on: { click: (e) => { on('options.thresholds', () => { th.splice(i, 1); }, true)(e); focusField('options.thresholds.add'); } } })]);
      Object.assign(row.style, { display: 'flex', flexWrap: 'wrap', gap: '0 0.6rem', alignItems: 'flex-end' });
      for (const n of row.querySelectorAll(':scope > .field')) n.style.flex = '1 1 6rem';
      fs.append(row);
    });
    fs.append(el('button', { type: 'button', class: 'small', text: 'Add threshold', 'data-key': 'options.thresholds.add', disabled: th.length >= MAX_THRESHOLDS,
      on: { click: (e) => {
        const last = th.length ? th[th.length - 1].value : null;
        on('options.thresholds', () => { th.push({ value: typeof last === 'number' ? last + 1 : 0, color: th.length ? 'critical' : 'warning' }); }, true)(e);
        focusField('options.thresholds[' + (th.length - 1) + '].value');
      } } }));
    return fs;
  }

  // ---------- saving ----------
  function save() {
    if (saving) return saving;
    const m = model(), ids = layout.widgets.map((w) => w.id), started = version;
    const local = precheck(m);
    if (local.length) {
      setErrors(local, ids, 'Fix these problems before saving:');
      return Promise.resolve(false);
    }
    ui.save.disabled = true; ui.saved.hidden = true;
    announce('Saving\u2026');
    saving = api('PUT', { name: doc.name, description: doc.description, layout: m }).then((d) => {
      if (version === started) dirty = false;
      if (d && typeof d.name === 'string') doc.name = d.name;
      setErrors([], ids, null);
      announce(''); ui.saved.hidden = false;
      return true;
    }, (err) => {
      const details = err.details || [];
      setErrors(details, ids, 'The dashboard was not saved: ' + (err.message || 'the server refused it') + (details.length ? ' \u2014 ' + details.length + (details.length === 1 ? ' problem:' : ' problems:') : ''), !details.length);
      announce('Not saved.');
      return false;
    }).finally(() => { saving = null; ui.save.disabled = false; });
    return saving;
  }

  // ---------- start ----------
  function arrange() {                                   // grid beside the form on wide screens, stacked on narrow ones
    const body = grid.parentElement, narrow = window.matchMedia && window.matchMedia('(max-width: 800px)').matches;
    Object.assign(body.style, { display: 'grid', gap: '1rem', alignItems: 'start', gridTemplateColumns: narrow ? '1fr' : 'minmax(0, 1fr) minmax(16rem, 22rem)' });
    Object.assign(aside.style, { background: 'var(--surface)', border: '1px solid var(--border)', borderRadius: 'var(--radius)', padding: '0 0.8rem 0.5rem',
      position: narrow ? 'static' : 'sticky', top: '0.5rem', maxHeight: narrow ? '' : 'calc(100vh - 1rem)', overflowY: 'auto' });
    grid.style.minHeight = (3 * ROW_PX) + 'px';
  }
  function start() {
    errBox.hidden = true;
    aside.textContent = '';
    aside.append(el('p', { class: 'loading', text: 'Loading the dashboard\u2026' }));
    return api('GET').then((d) => {
      load(d || {});
      renderToolbar(); refreshAssetChoices(); renderGrid(); renderForm();
      return true;
    }, (err) => {
      errBox.textContent = 'Could not load the dashboard: ' + err.message;
      errBox.hidden = false;
      aside.textContent = '';
      aside.append(el('p', { text: 'The editor needs the dashboard to start.' }),
        el('div', { class: 'actions' }, [el('button', { type: 'button', text: 'Try again', on: { click: () => { ready = start(); } } }),
          el('a', { class: 'button', href: viewUrl, text: 'Back to the dashboard' })]));
      return false;
    });
  }

  window.addEventListener('beforeunload', (e) => {
    if (!dirty) return;
    e.preventDefault(); e.returnValue = '';
  });
  if (window.matchMedia) window.matchMedia('(max-width: 800px)').addEventListener('change', arrange);
  arrange();
  let ready = start();
  // Test hook: the layout as it would be saved, saving (resolves true when saved, false when refused) and the load.
  window.plantdEditor = { model: () => model(), save: () => (ui.save ? save() : Promise.resolve(false)), ready: () => ready, dirty: () => dirty, add: addWidget };
})();
