// plantd console: shared behaviour of the server-rendered pages (JSON API forms, confirmations, theme, local times, live alerts table).
(function () {
  'use strict';

  const THEME_KEY = 'plantd-theme';
  // Test hook: alert events received on the alerts page and whether its stream is connected.
  const hook = { alertEvents: 0, connected: false };
  window.plantdConsole = hook;

  function el(tag, props, children) {
    const e = document.createElement(tag);
    for (const k of Object.keys(props || {})) {
      const v = props[k];
      if (v == null || v === false) continue;
      if (k === 'text') e.textContent = v;
      else if (k === 'hidden') e.hidden = v;
      else e.setAttribute(k, String(v));
    }
    for (const c of children || []) if (c != null) e.append(c);
    return e;
  }
  const fmtTime = (iso) => { const d = new Date(iso); return isNaN(d.getTime()) ? String(iso) : d.toLocaleString(); };

  // ---------- (c) theme ----------
  function currentTheme() {
    const t = document.documentElement.dataset.theme;
    return t || (window.matchMedia && matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light');
  }
  function labelThemeButton(b) {
    const dark = currentTheme() === 'dark';
    b.textContent = dark ? 'Light theme' : 'Dark theme';
    b.setAttribute('aria-pressed', String(dark));
  }
  function initTheme() {
    let saved = null;
    try { saved = localStorage.getItem(THEME_KEY); } catch (e) { /* no storage */ }
    if (saved === 'light' || saved === 'dark') document.documentElement.dataset.theme = saved;
    const b = document.getElementById('theme-toggle');
    if (!b || b.dataset.bound) return;                  // dashboard.js may have taken it already
    b.dataset.bound = '1';
    b.classList.add('theme-button');
    labelThemeButton(b);
    b.addEventListener('click', () => {
      const next = currentTheme() === 'dark' ? 'light' : 'dark';
      document.documentElement.dataset.theme = next;
      try { localStorage.setItem(THEME_KEY, next); } catch (e) { /* the choice lasts this page */ }
      for (const x of document.querySelectorAll('.theme-button')) labelThemeButton(x);
    });
    if (window.matchMedia) matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => labelThemeButton(b));
  }

  // ---------- (d) times in the browser's time zone ----------
  // Today's times without the date (tables stay narrow); other days with it.
  function localText(d) {
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  }
  function localizeTimes(root) {
    for (const t of (root || document).querySelectorAll('time[datetime]')) {
      const iso = t.getAttribute('datetime'), d = new Date(iso);
      if (isNaN(d.getTime())) continue;
      if (!t.title) t.title = iso;                      // the exact UTC value stays one hover away
      t.textContent = localText(d);
    }
  }

  // ---------- (b) confirmations ----------
  // Buttons and links with data-confirm ask on click, forms with data-confirm on submit; both in the capture
  // phase, so that a refusal stops everything else (the submission, the JSON request, other handlers).
  document.addEventListener('click', (ev) => {
    const b = ev.target instanceof Element ? ev.target.closest('button[data-confirm], a[data-confirm], input[data-confirm]') : null;
    if (b && !window.confirm(b.getAttribute('data-confirm'))) { ev.preventDefault(); ev.stopImmediatePropagation(); }
  }, true);
  document.addEventListener('submit', (ev) => {
    const form = ev.target;
    if (form instanceof HTMLFormElement && form.hasAttribute('data-confirm') && !window.confirm(form.getAttribute('data-confirm'))) {
      ev.preventDefault(); ev.stopImmediatePropagation();
    }
  }, true);

  // ---------- (a) forms that call the API with JSON ----------
  // <form class="api-form" data-method="POST" data-action="/v1/..." [data-redirect="/dashboards/{id}"]
  //       [data-show-result="secret|invitation|test|<field>"] [data-body="<field>"] [data-confirm="..."]>
  // Values: data-type="number", "json" (parsed), "list" (comma-separated), "boolean" ("true"/"false", e.g. hidden
  // inputs), "multi" or "list" on checkboxes (the array of the checked values); other checkboxes are booleans,
  // <select multiple> arrays; dotted names nest (name="config.port"). Empty fields are left out of POST bodies (an
  // absent optional field) and sent as "" by PUT/PATCH (which clears, the update being partial); empty numbers and
  // JSON are always left out; data-empty="omit" | "null" | "send" decides for one field. data-body="document" sends
  // that field's JSON as the whole body (the import of an exported document).
  function setPath(obj, name, value) {
    const parts = name.split('.');
    let o = obj;
    for (let i = 0; i < parts.length - 1; i++) {
      if (typeof o[parts[i]] !== 'object' || o[parts[i]] === null || Array.isArray(o[parts[i]])) o[parts[i]] = {};
      o = o[parts[i]];
    }
    o[parts[parts.length - 1]] = value;
  }
  function readForm(form, method) {
    const body = {}, errors = [], lists = {}, keepEmpty = method === 'PUT' || method === 'PATCH';
    for (const input of Array.from(form.elements)) {
      const name = input.name, type = input.dataset.type || '';
      if (!name || input.disabled || ['submit', 'button', 'reset', 'file', 'image'].indexOf(input.type) >= 0) continue;
      if (input.tagName === 'FIELDSET' || input.tagName === 'OUTPUT' || (input.type === 'radio' && !input.checked)) continue;
      if (input.type === 'checkbox') {
        if (type === 'list' || type === 'multi') {                          // a group of checkboxes: the array of the checked values
          if (!lists[name]) { lists[name] = []; setPath(body, name, lists[name]); }
          if (input.checked) lists[name].push(input.value);
        } else setPath(body, name, input.checked);
        continue;
      }
      if (input.tagName === 'SELECT' && input.multiple) { setPath(body, name, Array.from(input.selectedOptions).map((o) => o.value)); continue; }
      const raw = input.value, empty = raw.trim() === '', mode = input.dataset.empty;
      if (empty && mode === 'null') { setPath(body, name, null); continue; }
      if (empty && (mode === 'omit' || (mode !== 'send' && (!keepEmpty || type === 'json')))) continue;
      if (type === 'boolean') {
        setPath(body, name, raw === 'true' || raw === 'on' || raw === '1');
      } else if (type === 'number') {
        if (empty) continue;
        const n = Number(raw);
        if (!isFinite(n)) { errors.push({ field: name, message: 'must be a number' }); continue; }
        setPath(body, name, n);
      } else if (type === 'json') {
        if (empty) continue;
        try { setPath(body, name, JSON.parse(raw)); } catch (e) { errors.push({ field: name, message: 'is not valid JSON: ' + e.message }); }
      } else if (type === 'list') {
        setPath(body, name, raw.split(',').map((s) => s.trim()).filter(Boolean));
      } else {
        setPath(body, name, raw);
      }
    }
    return { body: body, errors: errors };
  }
  function fieldInput(form, field) {                    // `config.port`, `scopes[0]`, `data[3].value`: the closest named input
    const candidates = [field, field.replace(/\[\d+\]$/, ''), field.replace(/\[\d+\]/g, ''), field.split(/[.[]/)[0]];
    for (const n of candidates) {
      const input = form.querySelector('[name="' + CSS.escape(n) + '"]');
      if (input) return input;
    }
    return null;
  }
  function clearErrors(form) {
    for (const e of form.querySelectorAll('[data-error-for]')) e.textContent = '';
    for (const e of form.querySelectorAll('.field-error[data-generated]')) e.remove();
    for (const i of form.querySelectorAll('[aria-invalid="true"]')) i.removeAttribute('aria-invalid');
    const box = form.querySelector('.form-error');
    if (box) box.textContent = '';
  }
  let errorSeq = 0;
  function showErrors(form, err) {
    const unplaced = [];
    let firstInvalid = null;
    for (const d of (err && err.details) || []) {
      if (!d || !d.field) { if (d && d.message) unplaced.push(d.message); continue; }
      const input = fieldInput(form, d.field);
      let target = form.querySelector('[data-error-for="' + CSS.escape(d.field) + '"]');
      if (!target && input) {
        target = form.querySelector('.field-error[data-generated][data-for-input="' + CSS.escape(input.name) + '"]');
        if (!target) {
          target = el('p', { class: 'field-error', 'data-generated': '', 'data-for-input': input.name, id: 'field-error-' + (++errorSeq) });
          const anchor = input.type === 'checkbox' || input.type === 'radio' ? input.closest('label') || input : input;
          anchor.insertAdjacentElement('afterend', target);
        }
      }
      if (!target) { unplaced.push(d.field + ': ' + d.message); continue; }
      const msg = input && target.dataset.generated != null && d.field !== input.name ? d.field + ': ' + d.message : d.message;
      target.textContent = target.textContent ? target.textContent + '; ' + msg : msg;
      if (input) {
        if (!target.id) target.id = 'field-error-' + (++errorSeq);
        input.setAttribute('aria-invalid', 'true');
        const ids = (input.getAttribute('aria-describedby') || '').split(/\s+/).filter(Boolean);
        if (ids.indexOf(target.id) < 0) input.setAttribute('aria-describedby', ids.concat(target.id).join(' '));
        firstInvalid = firstInvalid || input;
      }
    }
    let box = form.querySelector('.form-error');
    if (!box) { box = el('p', { class: 'form-error', role: 'alert' }); form.prepend(box); }
    box.textContent = ((err && err.message) || 'the request failed') + (unplaced.length ? ' \u2014 ' + unplaced.join('; ') : '');
    if (!firstInvalid) box.tabIndex = -1;
    (firstInvalid || box).focus();
  }
  function redirectTarget(template, data) {             // same-origin paths only; {id} and other {field}s from the answer
    const url = template.replace(/\{(\w+)\}/g, (m, k) => data && data[k] != null ? encodeURIComponent(data[k]) : m);
    return url[0] === '/' && url[1] !== '/' && url[1] !== '\\' ? url : null;
  }
  // data-show-result: the answer is shown in the form's <output class="result"> and the page stays (a secret is
  // shown only once). "secret": the created key; "invitation": the acceptance link or whether it was emailed;
  // "test": a data source test; another name: that field of the answer.
  function showResult(form, mode, data) {
    let out = form.querySelector('output.result');
    if (!out) { out = el('output', { class: 'result' }); form.append(out); }
    out.setAttribute('aria-live', 'polite');
    out.textContent = '';
    out.classList.remove('failed');
    const d = data || {}, inv = d.invitation || {};
    if (mode === 'secret') {
      out.append(el('p', { text: 'Copy the key now; it is shown only once:' }), el('code', { text: String(d.key || d.secret || d.token || '') }));
      for (const i of form.querySelectorAll('input:not([type="hidden"]):not([type="checkbox"])')) i.value = '';
      for (const i of form.querySelectorAll('input[type="checkbox"]')) i.checked = false;
    } else if (mode === 'invitation') {
      if (inv.url) out.append(el('p', { text: 'No email went out' + (inv.email_error ? ' (' + inv.email_error + ')' : '') + '; pass this link on:' }), el('code', { text: inv.url }));
      else out.append(el('p', { text: '\u2713 Invitation emailed to ' + (d.email || 'the person') + (inv.expires_at ? '; it expires ' + fmtTime(inv.expires_at) : '') + '.' }));
    } else if (mode === 'test') {
      out.classList.toggle('failed', !d.success);
      out.append(el('span', { class: 'badge ' + (d.success ? 'ok' : 'critical'), text: d.success ? '\u2713 passed' : '\u25B2 failed' }),
        ' ' + (d.message || '') + (d.latency_ms != null ? ' (' + d.latency_ms + ' ms)' : ''));
    } else {
      const v = d[mode] !== undefined ? d[mode] : d;
      out.append(typeof v === 'object' ? el('pre', { text: JSON.stringify(v, null, 2) }) : el('code', { text: String(v) }));
    }
  }
  async function submitApiForm(form) {
    clearErrors(form);
    const method = (form.dataset.method || 'POST').toUpperCase(), action = form.dataset.action || '';
    const read = readForm(form, method);
    if (form.dataset.body) {                            // one field's JSON is the whole body
      const field = form.dataset.body, input = form.elements.namedItem(field);
      read.body = {};
      try { read.body = JSON.parse(input && input.value ? input.value : 'null'); } catch (e) { read.errors.push({ field: field, message: 'is not valid JSON: ' + e.message }); }
    }
    if (read.errors.length) { showErrors(form, { message: 'please correct the marked fields', details: read.errors }); return; }
    if (action.indexOf('/v1/') !== 0 && action.indexOf('/api/v1/') !== 0) { showErrors(form, { message: 'this form has no API address (data-action)' }); return; }
    const init = { method: method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (method !== 'GET' && method !== 'HEAD' && (method !== 'DELETE' || (read.body && Object.keys(read.body).length))) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(read.body);
    }
    const buttons = Array.from(form.querySelectorAll('button, input[type="submit"]')).filter((b) => !b.disabled);
    buttons.forEach((b) => { b.disabled = true; });
    form.setAttribute('aria-busy', 'true');
    try {
      let res;
      try { res = await fetch(action, init); } catch (e) { showErrors(form, { message: 'cannot reach the server (' + e.message + ')' }); return; }
      const body = res.status === 204 ? null : await res.json().catch(() => null);
      if (!res.ok) { showErrors(form, (body && body.error) || { message: 'the request failed: HTTP ' + res.status }); return; }
      const data = body && body.data;
      // A page script may take the answer over (the alerts table does): it cancels the event, nothing navigates.
      if (!form.dispatchEvent(new CustomEvent('api-form:success', { bubbles: true, cancelable: true, detail: data }))) return;
      if (form.dataset.showResult) { showResult(form, form.dataset.showResult, data); return; }
      const target = form.dataset.redirect ? redirectTarget(form.dataset.redirect, data) : null;
      if (target) window.location.assign(target); else window.location.reload();
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
      form.removeAttribute('aria-busy');
    }
  }
  document.addEventListener('submit', (ev) => {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains('api-form')) return;
    ev.preventDefault();
    submitApiForm(form);
  });

  // ---------- (e) the alerts page, live ----------
  // Rows are <tr data-alert-id data-status> as the server renders them (severity, status, alert, asset, value,
  // triggered, acknowledged, and the actions column when the header has one); a live event replaces or inserts a row.
  const SHAPE = { critical: '\u25B2', warning: '\u25C6', info: '\u25CF' };
  const STATUS_CLASS = { active: 'active', acknowledged: 'acknowledged', resolved: 'ok' };
  const STATUS_RANK = { active: 0, acknowledged: 1, resolved: 2 };
  function formatValue(v) { return Number.isInteger(v) && Math.abs(v) < 1e15 ? String(v) : Number(v).toFixed(3); }
  function timeEl(iso) { return el('time', { datetime: iso, title: iso, text: fmtTime(iso) }); }
  function alertForm(a, action, label) {
    const form = el('form', { class: 'api-form inline', 'data-method': 'POST', 'data-action': '/v1/alerts/' + encodeURIComponent(a.id) + '/' + action });
    if (action === 'acknowledge') {
      const id = 'note-' + a.id;
      form.append(el('label', { for: id, class: 'visually-hidden', text: 'Note' }), el('input', { id: id, name: 'note', placeholder: 'Note (optional)', maxlength: '1000' }));
    }
    form.append(el('button', { type: 'submit', text: label }), el('p', { class: 'form-error', role: 'alert' }));
    return form;
  }
  function alertRow(a, withActions) {
    const td = (cls, kids) => el('td', { class: cls }, kids);
    const small = (text, cls) => el('small', { class: cls, text: text });
    const ack = a.acknowledged_at ? [timeEl(a.acknowledged_at)].concat(a.acknowledged_by ? [el('br'), small('by ' + a.acknowledged_by)] : [],
      a.note ? [el('br'), small('\u201C' + a.note + '\u201D', 'note')] : []) : ['\u2013'];
    const row = el('tr', { 'data-alert-id': a.id, 'data-status': a.status }, [
      td(null, [el('span', { class: 'badge ' + a.severity, text: (SHAPE[a.severity] || '') + ' ' + a.severity })]),
      td(null, [el('span', { class: 'badge ' + (STATUS_CLASS[a.status] || a.status), text: a.status })]),
      td(null, [a.title || a.rule_name || ''].concat(a.message ? [el('br'), small(a.message)] : [])),
      td(null, [a.asset_id + (a.tag_name ? ' / ' + a.tag_name : '')]),
      td('num', [a.value == null ? '' : formatValue(a.value)]),
      td(null, [timeEl(a.triggered_at)]),
      td(null, ack),
    ]);
    if (withActions) {
      row.append(td('actions', [a.status === 'active' ? alertForm(a, 'acknowledge', 'Acknowledge') : null,
        a.status !== 'resolved' ? alertForm(a, 'resolve', 'Resolve') : null]));
    }
    return row;
  }
  function initAlertsPage() {
    const page = document.getElementById('alerts-page');
    const table = document.getElementById('alerts-table');
    const tbody = table && table.tBodies[0];
    if (!page || !tbody) return;
    const heads = Array.from(table.querySelectorAll('thead th'));
    const withActions = heads.length > 7 || heads.some((th) => /action/i.test(th.textContent));
    const query = new URLSearchParams(location.search);
    const filter = { status: query.get('status'), severity: query.get('severity') };
    const matches = (a) => (!filter.status || a.status === filter.status) && (!filter.severity || a.severity === filter.severity);
    let status = document.getElementById('live-status');
    if (!status) { status = el('p', { id: 'live-status', class: 'live-indicator', role: 'status', 'aria-live': 'polite' }); table.parentNode.insertBefore(status, table); }
    let errorBox = null;
    const showError = (msg) => {
      if (!errorBox) { errorBox = el('p', { class: 'error alerts-error', role: 'alert' }); status.insertAdjacentElement('afterend', errorBox); }
      errorBox.hidden = !msg;
      errorBox.textContent = msg || '';
    };
    function upsert(a) {
      if (!a || !a.id) return;
      const old = tbody.querySelector('tr[data-alert-id="' + CSS.escape(a.id) + '"]');
      if (old && (STATUS_RANK[old.dataset.status] || 0) > (STATUS_RANK[a.status] || 0)) return;   // an older event: never step back
      if (!matches(a)) { if (old) old.remove(); return; }
      if (old && old.contains(document.activeElement) && old.dataset.status === a.status) return; // someone is typing a note
      const row = alertRow(a, withActions);
      if (old) old.replaceWith(row); else tbody.prepend(row);  // newest first
      for (const r of tbody.querySelectorAll('tr.empty')) r.remove();
      row.classList.add('flash');
      setTimeout(() => row.classList.remove('flash'), 1500);
    }
    // Acknowledge and resolve forms in the table: their answer is the alert; show it instead of reloading.
    table.addEventListener('api-form:success', (ev) => { if (ev.detail && ev.detail.id) { ev.preventDefault(); upsert(ev.detail); } });
    async function backfill() {                         // what changed while the stream was down
      try {
        const q = new URLSearchParams({ per_page: '100' });
        if (filter.status) q.set('status', filter.status);
        if (filter.severity) q.set('severity', filter.severity);
        const res = await fetch('/v1/alerts?' + q, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
        const json = await res.json().catch(() => null);
        if (!res.ok) { showError((json && json.error && json.error.message) || 'alerts could not be read: HTTP ' + res.status); return; }
        showError(null);
        ((json && json.data) || []).slice().reverse().forEach(upsert);   // oldest first, so the newest ends on top
      } catch (e) {
        showError('cannot reach the server (' + e.message + ')');
      }
    }
    // One connection with one unfiltered subscription: the only filter that covers every alert, including alerts
    // without a tag or data source. Telemetry arriving on it is ignored. Reconnects after 1, 2, 4 ... 30 s.
    let ws = null, attempt = 0, lostAt = Date.now(), pingTimer = 0, reason = '';
    function setStatus() {
      status.className = 'live-indicator ' + (lostAt == null ? 'live' : 'lost');
      status.textContent = lostAt == null ? 'live: new and changed alerts appear here'
        : 'live stream lost \u2013 reconnecting\u2026' + (reason ? ' (' + reason + ')' : '');
    }
    function connect() {
      let sock;
      try { sock = new WebSocket((location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + location.host + '/v1/ws'); } catch (e) { reason = e.message; retry(); return; }
      ws = sock;
      sock.onopen = () => {
        const wasLost = attempt > 0;
        lostAt = null; reason = ''; hook.connected = true;
        setTimeout(() => { if (ws === sock) attempt = 0; }, 5000);   // the backoff restarts once the link has held
        sock.send(JSON.stringify({ type: 'subscribe' }));
        pingTimer = setInterval(() => { if (sock.readyState === 1) sock.send(JSON.stringify({ type: 'ping' })); }, 25000);
        setStatus();
        if (wasLost) backfill();
      };
      sock.onmessage = (ev) => {
        let m;
        try { m = JSON.parse(ev.data); } catch (e) { return; }
        if (m.type === 'alert') { hook.alertEvents++; upsert(m.data); }
        else if (m.type === 'error') showError('live stream: ' + m.message);
      };
      sock.onclose = (ev) => {
        if (ws !== sock) return;
        ws = null; hook.connected = false;
        clearInterval(pingTimer);
        reason = ev.reason || '';
        retry();
      };
    }
    function retry() {
      if (lostAt == null) lostAt = Date.now();
      setStatus();
      setTimeout(connect, Math.min(30000, 1000 * Math.pow(2, attempt++)));
    }
    status.className = 'live-indicator';
    status.textContent = 'connecting to the live stream\u2026';
    connect();
  }

  // ---------- (f) the overview's latest values, live ----------
  // Rows are <tr data-asset data-tag> with td.value and a <time>; a value is written at most once per
  // animation frame. The page follows only what it shows: one subscription naming its series. When it
  // shows every tag of the organization (data-complete: no search, one page), it follows everything
  // instead, and a series it did not have (the first points of a source that connected after the page
  // loaded) gets its row, and its asset its card, as its first point arrives. Reconnects after 1, 2,
  // 4 ... 30 s.
  function initOverview() {
    const root = document.getElementById('overview');
    if (!root) return;
    const rows = new Map();
    for (const tr of root.querySelectorAll('tr[data-asset][data-tag]')) rows.set(tr.dataset.asset + '\u0000' + tr.dataset.tag, tr);
    const complete = root.dataset.complete === 'true';
    const series = [...root.querySelectorAll('tr[data-asset][data-tag]')].map((tr) => ({ asset_id: tr.dataset.asset, tag_name: tr.dataset.tag }));
    if (!complete && !series.length) return;
    const fmt = (v) => Number.isInteger(v) ? String(v) : v.toFixed(3);
    let pending = new Map(), frame = 0, attempt = 0;
    function el(tag, attrs, text) {
      const e = document.createElement(tag);
      for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
      if (text !== undefined) e.textContent = text;
      return e;
    }
    // The card of `asset`, made (in name order) if the page has none yet.
    function card(asset) {
      const cards = root.querySelector('.cards');
      for (const c of cards.querySelectorAll('article.card')) if (c.dataset.asset === asset) return c;
      const c = el('article', { class: 'card', 'data-asset': asset });
      c.appendChild(el('h3', {}, asset));
      const table = el('table', { class: 'list compact' });
      const head = el('tr');
      head.append(el('th', { scope: 'col' }, 'Tag'), el('th', { scope: 'col', class: 'num' }, 'Value'), el('th', { scope: 'col' }), el('th', { scope: 'col' }, 'Updated'));
      table.append(el('thead'), el('tbody'));
      table.tHead.appendChild(head);
      c.appendChild(table);
      const after = [...cards.querySelectorAll('article.card')].find((x) => x.dataset.asset > asset);
      cards.insertBefore(c, after || null);
      const empty = root.querySelector('p.quiet');
      if (empty) empty.remove();
      return c;
    }
    function row(asset, tag) {
      const key = asset + '\u0000' + tag;
      let tr = rows.get(key);
      if (tr || !complete) return tr;
      const body = card(asset).querySelector('tbody');
      tr = el('tr', { 'data-asset': asset, 'data-tag': tag });
      tr.append(el('th', { scope: 'row' }, tag), el('td', { class: 'num value' }), el('td', { class: 'unit' }), el('td', { class: 'age' }));
      tr.lastChild.appendChild(el('time'));
      const after = [...body.querySelectorAll('tr[data-tag]')].find((x) => x.dataset.tag > tag);
      body.insertBefore(tr, after || null);
      rows.set(key, tr);
      return tr;
    }
    function draw() {
      frame = 0;
      for (const p of pending.values()) {
        const tr = row(p.asset_id, p.tag_name);
        if (!tr) continue;
        if (p.quality === 'good' && tr.classList.contains('stale')) {  // confirmed again
          tr.classList.remove('stale');
          const badge = tr.querySelector('.badge.stale');
          if (badge) badge.remove();
        }
        const cell = tr.querySelector('td.value'), t = tr.querySelector('time');
        if (cell) cell.textContent = fmt(p.value);
        if (t) { t.setAttribute('datetime', p.timestamp); t.title = p.timestamp; const d = new Date(p.timestamp); if (!isNaN(d.getTime())) t.textContent = localText(d); }
      }
      pending = new Map();
    }
    function connect() {
      let sock;
      try { sock = new WebSocket((location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' + location.host + '/v1/ws'); } catch (e) { retry(); return; }
      sock.onopen = () => { sock.send(JSON.stringify(complete ? { type: 'subscribe' } : { type: 'subscribe', series: series })); setTimeout(() => { attempt = 0; }, 5000); };
      sock.onmessage = (ev) => {
        let m;
        try { m = JSON.parse(ev.data); } catch (e) { return; }
        if (m.type !== 'telemetry') return;
        for (const p of m.data || []) {
          if (typeof p.value === 'number' && typeof p.asset_id === 'string' && typeof p.tag_name === 'string') {
            pending.set(p.asset_id + '\u0000' + p.tag_name, p);
          }
        }
        if (pending.size && !frame) frame = requestAnimationFrame(draw);
      };
      sock.onclose = () => retry();
    }
    function retry() { setTimeout(connect, Math.min(30000, 1000 * Math.pow(2, attempt++))); }
    connect();
  }

  function init() {
    initTheme();
    localizeTimes(document);
    initAlertsPage();
    initOverview();
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init); else init();
})();
