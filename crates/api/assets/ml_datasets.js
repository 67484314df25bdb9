// plantd console, ML dataset pages. The list: a dataset created from a CSV file (created with POST /v1/ml/datasets,
// then the file sent as multipart with its upload progress; a refused file's bad lines listed, and the next try
// uploads to the dataset already created), or from telemetry (the form's local times sent as RFC 3339). A dataset's
// page: rows uploaded and versions made with a file (multipart, with progress), two versions compared, the rule
// form's config fields for the chosen type, and a validation run and shown. Simple forms are console.js's api-forms.
(function () {
  'use strict';
  // Test hook: what the page did.
  const hook = { uploads: 0, validations: 0, comparisons: 0 };
  window.plantdDatasets = hook;

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
  const fmt = (v) => v == null ? '\u2013' : typeof v === 'number' ? (Number.isInteger(v) && Math.abs(v) < 1e15 ? String(v) : v.toFixed(3)) : String(v);
  const localTime = (iso) => { const d = new Date(iso); return isNaN(d.getTime()) ? String(iso) : d.toLocaleString(); };

  // A JSON call with the session cookie (the API checks the Origin header the browser sends); resolves with the
  // answer's data, rejects with the API's error ({message, details}).
  async function call(method, path, body) {
    const init = { method: method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    let res;
    try { res = await fetch(path, init); } catch (e) { throw { message: 'cannot reach the server (' + e.message + ')' }; }
    const answer = res.status === 204 ? null : await res.json().catch(() => null);
    if (!res.ok) throw (answer && answer.error) || { message: 'the request failed: HTTP ' + res.status };
    return answer && answer.data;
  }

  // A multipart POST through XMLHttpRequest, whose upload progress fills `bar` (a <progress>).
  function sendMultipart(path, data, bar) {
    return new Promise((resolve, reject) => {
      const xhr = new XMLHttpRequest();
      xhr.open('POST', path);
      xhr.setRequestHeader('Accept', 'application/json');
      if (bar) { bar.hidden = false; bar.value = 0; }
      xhr.upload.onprogress = (e) => { if (bar && e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100); };
      xhr.onloadend = () => {
        if (bar) bar.hidden = true;
        let body = null;
        try { body = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
        if (xhr.status >= 200 && xhr.status < 300) { resolve(body && body.data); return; }
        reject((body && body.error) || { message: xhr.status ? 'the upload failed: HTTP ' + xhr.status : 'cannot reach the server' });
      };
      xhr.send(data);
    });
  }

  function clearErrors(form) {
    for (const e of form.querySelectorAll('[data-error-for], .form-error')) e.textContent = '';
    for (const l of form.querySelectorAll('.upload-errors')) { l.textContent = ''; l.hidden = true; }
  }
  // The API's refusal: each bad line of a file in the form's list (the API names them on the field `file`), other
  // fields beside their input, the message (and `note`) in the form's error box.
  function showErrors(form, err, note) {
    const list = form.querySelector('.upload-errors');
    for (const d of (err && err.details) || []) {
      const target = d.field ? form.querySelector('[data-error-for="' + CSS.escape(d.field) + '"]') : null;
      if (list && (!d.field || d.field === 'file' || !target)) {
        list.append(el('li', { text: d.field && d.field !== 'file' ? d.field + ': ' + d.message : d.message }));
        list.hidden = false;
      } else if (target) {
        target.textContent = target.textContent ? target.textContent + '; ' + d.message : d.message;
      }
    }
    const box = form.querySelector('.form-error');
    if (box) box.textContent = ((err && err.message) || 'the request failed') + (note ? ' ' + note : '');
  }

  // ---------- the list: a dataset from a CSV file ----------
  const create = document.getElementById('dataset-upload');
  if (create) {
    let made = null;            // {id, name}: created, its file refused; the next try with this name uploads to it
    create.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearErrors(create);
      const name = create.elements.namedItem('name').value.trim();
      const description = create.elements.namedItem('description').value.trim();
      const file = create.elements.namedItem('file').files[0];
      if (!file) { showErrors(create, { message: 'choose a CSV file' }); return; }
      const button = create.querySelector('button[type="submit"]');
      button.disabled = true;
      try {
        if (!made || made.name !== name) {
          const body = { name: name };
          if (description) body.description = description;
          const d = await call('POST', '/v1/ml/datasets', body);
          made = { id: d.id, name: name };
        }
        const data = new FormData();
        data.append('file', file, file.name);
        hook.uploads++;
        await sendMultipart('/v1/ml/datasets/' + encodeURIComponent(made.id) + '/upload', data, document.getElementById('ds-progress'));
        made = null;
        window.location.reload();
      } catch (err) {
        showErrors(create, err, made ? 'The dataset \u201C' + made.name + '\u201D was created without rows: choose a corrected file and upload again.' : '');
      } finally {
        button.disabled = false;
      }
    });
  }

  // ---------- the list: a dataset from telemetry ----------
  // datetime-local inputs carry no name; they fill the hidden inputs the api-form sends, as RFC 3339 UTC.
  function syncTimes(form) {
    for (const input of form.querySelectorAll('input[data-time-for]')) {
      const hidden = form.querySelector('input[type="hidden"][name="' + CSS.escape(input.dataset.timeFor) + '"]');
      if (!hidden) continue;
      const d = input.value ? new Date(input.value) : null;
      hidden.value = d && !isNaN(d.getTime()) ? d.toISOString() : '';
    }
  }
  function localInputValue(d) {
    const p = (n) => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + 'T' + p(d.getHours()) + ':' + p(d.getMinutes());
  }
  const telemetry = document.getElementById('dataset-telemetry');
  if (telemetry) {
    const now = Date.now();
    const start = telemetry.querySelector('[data-time-for="telemetry.start"]');
    const end = telemetry.querySelector('[data-time-for="telemetry.end"]');
    if (start && !start.value) start.value = localInputValue(new Date(now - 24 * 3600 * 1000));
    if (end && !end.value) end.value = localInputValue(new Date(now + 60 * 1000));   // the current minute's bucket too
    syncTimes(telemetry);
    telemetry.addEventListener('input', () => syncTimes(telemetry));
    // On the form itself, so it runs before console.js reads the form (its listener is on the document).
    telemetry.addEventListener('submit', () => syncTimes(telemetry));
  }

  // ---------- a dataset ----------
  const root = document.getElementById('dataset');
  if (!root) return;
  const id = root.dataset.id;
  const base = '/v1/ml/datasets/' + encodeURIComponent(id);

  // Rows uploaded (append or replace), and a new version (notes, and a file replacing the rows first): multipart.
  function multipartForm(form, path, fields, bar) {
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearErrors(form);
      const data = new FormData();
      for (const name of fields) {
        const v = form.elements.namedItem(name);
        if (v && v.value.trim()) data.append(name, v.value.trim());
      }
      const fileInput = form.elements.namedItem('file');
      const file = fileInput && fileInput.files[0];
      if (file) data.append('file', file, file.name);
      const button = form.querySelector('button[type="submit"]');
      button.disabled = true;
      try {
        hook.uploads++;
        await sendMultipart(path(form), data, bar);
        window.location.reload();
      } catch (err) {
        showErrors(form, err);
      } finally {
        button.disabled = false;
      }
    });
  }
  const rows = document.getElementById('rows-upload');
  if (rows) {
    multipartForm(rows, (f) => f.dataset.action + '?mode=' + encodeURIComponent(f.elements.namedItem('mode').value), [],
      document.getElementById('rows-progress'));
  }
  const version = document.getElementById('version-form');
  if (version) multipartForm(version, (f) => f.dataset.action, ['notes'], document.getElementById('version-progress'));

  // ---------- compare ----------
  function renderComparison(c) {
    const out = document.getElementById('compare-result');
    out.textContent = '';
    const side = (v) => v === 'working' ? 'the working copy' : v;
    out.append(el('p', {}, ['From ', el('code', { text: side(c.v1) }), ' to ', el('code', { text: side(c.v2) })]));
    const summary = el('table', { class: 'list compact', id: 'compare-summary' }, [el('tbody')]);
    for (const [label, key] of [['Rows added', 'rows_added'], ['Rows removed', 'rows_removed'], ['Rows changed', 'rows_changed'], ['Labels changed', 'labels_changed']]) {
      summary.tBodies[0].append(el('tr', { 'data-field': key }, [el('th', { scope: 'row', text: label }), el('td', { class: 'num', text: fmt(c[key]) })]));
    }
    out.append(summary);
    if (!(c.columns || []).length) return;
    const head = el('tr', {}, ['Column', 'Type', 'Count before', 'Count after', 'Mean before', 'Mean after', 'Std before', 'Std after']
      .map((t, i) => el('th', { scope: 'col', class: i > 1 ? 'num' : null, text: t })));
    const body = el('tbody');
    for (const col of c.columns) {
      const b = col.before || {}, a = col.after || {};
      const changed = (x, y) => x !== y ? 'changed' : null;
      body.append(el('tr', { 'data-column': col.name }, [
        el('th', { scope: 'row', text: col.name }),
        el('td', { text: col.type }),
        el('td', { class: 'num', text: fmt(b.count) }),
        el('td', { class: 'num ' + (changed(b.count, a.count) || ''), text: fmt(a.count) }),
        el('td', { class: 'num', text: fmt(b.mean) }),
        el('td', { class: 'num ' + (changed(b.mean, a.mean) || ''), text: fmt(a.mean) }),
        el('td', { class: 'num', text: fmt(b.std) }),
        el('td', { class: 'num ' + (changed(b.std, a.std) || ''), text: fmt(a.std) }),
      ]));
    }
    out.append(el('div', { class: 'table-wrap' }, [el('table', { class: 'list compact', id: 'compare-columns' }, [el('thead', {}, [head]), body])]));
  }
  const compare = document.getElementById('compare-form');
  if (compare) {
    compare.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearErrors(compare);
      const q = new URLSearchParams({ v1: compare.elements.namedItem('v1').value, v2: compare.elements.namedItem('v2').value });
      try {
        renderComparison(await call('GET', compare.dataset.action + '?' + q));
        hook.comparisons++;
      } catch (err) {
        showErrors(compare, err);
      }
    });
  }

  // ---------- rules: the config fields of the chosen type ----------
  const ruleForm = document.getElementById('rule-form');
  if (ruleForm) {
    const type = ruleForm.elements.namedItem('rule_type');
    const show = () => {
      for (const box of ruleForm.querySelectorAll('[data-rule-types]')) {
        const on = box.dataset.ruleTypes.split(' ').indexOf(type.value) >= 0;
        box.hidden = !on;
        for (const input of box.querySelectorAll('input, select, textarea')) input.disabled = !on;  // console.js skips them
      }
    };
    type.addEventListener('change', show);
    show();
  }

  // ---------- validate ----------
  function renderValidation(v) {
    const out = document.getElementById('validation');
    out.textContent = '';
    const badge = v.valid ? el('span', { class: 'badge ok', 'data-valid': 'true', text: '\u2713 valid' })
      : el('span', { class: 'badge warning', 'data-valid': 'false', text: '\u25C6 rules violated' });
    const when = el('time', { datetime: v.validated_at, title: v.validated_at, text: localTime(v.validated_at) });
    out.append(el('p', { class: 'validation-summary' }, [badge, ' grade ', el('strong', { class: 'grade', 'data-grade': v.grade, text: v.grade }),
      ' \u00B7 quality score ', el('span', { class: 'score', text: Number(v.quality_score).toFixed(1) }),
      ' \u00B7 ' + v.row_count + ' rows \u00B7 validated ', when]));
    if (!(v.issues || []).length) return;
    const body = el('tbody');
    for (const i of v.issues) {
      const rowsCell = el('td', { class: 'row-ids' });
      i.rows.forEach((r, k) => {
        if (k) rowsCell.append(', ');
        rowsCell.append(el('a', { href: '/ml/datasets/' + encodeURIComponent(id) + '/label?row=' + r, text: String(r) }));
      });
      if (i.rows_truncated) rowsCell.append(' \u2026');
      body.append(el('tr', { 'data-rule-id': i.rule_id }, [el('td', { text: i.rule_name }), el('td', { text: i.column }), el('td', { text: i.rule_type }),
        el('td', { class: 'num', 'data-violations': i.violations, text: String(i.violations) }), rowsCell]));
    }
    const head = el('tr', {}, ['Rule', 'Column', 'Type', 'Violations', 'Rows'].map((t) => el('th', { scope: 'col', class: t === 'Violations' ? 'num' : null, text: t })));
    out.append(el('table', { class: 'list compact', id: 'validation-issues' }, [el('thead', {}, [head]), body]));
  }
  const validate = document.getElementById('validate-button');
  if (validate) {
    validate.addEventListener('click', async () => {
      const box = document.getElementById('validate-error');
      box.textContent = '';
      validate.disabled = true;
      validate.setAttribute('aria-busy', 'true');
      try {
        renderValidation(await call('POST', base + '/validate'));
        hook.validations++;
      } catch (err) {
        box.textContent = (err && err.message) || String(err);
      } finally {
        validate.disabled = false;
        validate.removeAttribute('aria-busy');
      }
    });
  }
})();
