// plantd console, ML training and model pages. Training (/ml/training): the train form's feature boxes follow the chosen
// dataset (its number columns, from its option's data-columns, all ticked); the form is console.js's api-form, whose
// answer (the queued job) this script takes over: the job's row is added without a reload. Every queued or running
// job is read again (GET /v1/ml/training/{id}) each second until it finishes, its status, progress, times and model
// link redrawn; a Cancel (an api-form DELETE) redraws its row from the answer. A model (/ml/models/{id}): a row tested
// (its score and verdict shown), the deploy form (asset ids and the tag of each feature: sent as built here, since
// feature names may hold dots, which api-forms read as nesting), and while deployed each asset's score tag over the
// last hour drawn with uPlot, the threshold a dashed line, refreshed every 5 s with the open alerts on it.
(function () {
  'use strict';
  // Test hook: what the pages did.
  // points: the scores drawn now, over every chart.
  const hook = { polls: 0, finished: 0, tests: 0, charts: 0, refreshes: 0, points: 0 };
  window.plantdModels = hook;

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
  const localTime = (iso) => {
    const d = new Date(iso);
    if (isNaN(d.getTime())) return String(iso);
    return d.toDateString() === new Date().toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  };
  const timeEl = (iso) => el('time', { datetime: iso, title: iso, text: localTime(iso) });
  const fixed3 = (v) => v == null || !isFinite(v) ? '\u2013' : Number(v).toFixed(3);

  // A JSON call with the session cookie; resolves with the answer's data, rejects with the API's error ({code, message,
  // details, retry_after}) and the HTTP status.
  async function call(method, path, body) {
    const init = { method: method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    let res;
    try { res = await fetch(path, init); } catch (e) { throw { status: 0, message: 'cannot reach the server (' + e.message + ')' }; }
    const answer = res.status === 204 ? null : await res.json().catch(() => null);
    if (!res.ok) throw Object.assign({ status: res.status }, (answer && answer.error) || { message: 'the request failed: HTTP ' + res.status });
    return answer && answer.data;
  }

  function clearErrors(form) {
    for (const e of form.querySelectorAll('[data-error-for], .form-error')) e.textContent = '';
    for (const i of form.querySelectorAll('[aria-invalid="true"]')) i.removeAttribute('aria-invalid');
  }
  // The API's refusal: each detail beside its field (`asset_ids[2]` beside `asset_ids`), others in the form's box.
  function showErrors(form, err) {
    const unplaced = [];
    for (const d of (err && err.details) || []) {
      const field = d.field || '';
      const target = field && (form.querySelector('[data-error-for="' + CSS.escape(field) + '"]') ||
        form.querySelector('[data-error-for="' + CSS.escape(field.replace(/\[\d+\]$/, '')) + '"]'));
      if (!target) { unplaced.push((field ? field + ': ' : '') + d.message); continue; }
      target.textContent = target.textContent ? target.textContent + '; ' + d.message : d.message;
      const input = target.previousElementSibling;
      if (input && (input.tagName === 'INPUT' || input.tagName === 'SELECT')) input.setAttribute('aria-invalid', 'true');
    }
    const box = form.querySelector('.form-error');
    if (box) box.textContent = ((err && err.message) || 'the request failed') + (unplaced.length ? ' \u2014 ' + unplaced.join('; ') : '');
  }

  // ---------- training: the jobs, live ----------
  const BADGE = { queued: ['\u25CB', 'queued'], running: ['\u25CF', 'info'], completed: ['\u2713', 'ok'], failed: ['\u25B2', 'critical'], cancelled: ['\u2715', 'resolved'] };
  const FINISHED = ['completed', 'failed', 'cancelled'];
  function durationText(s) {
    if (s < 60) return s.toFixed(1) + ' s';
    const whole = Math.round(s);
    return Math.floor(whole / 60) + ' min ' + (whole % 60) + ' s';
  }
  const jobsTable = document.getElementById('training-jobs');
  const trainForm = document.getElementById('training-form');
  if (jobsTable) {
    const tbody = jobsTable.tBodies[0];
    const write = jobsTable.dataset.write === 'true';
    const errorBox = document.getElementById('jobs-error');
    const active = new Set();
    let timer = 0, delay = 1000;
    const rowOf = (id) => tbody.querySelector('tr[data-job-id="' + CSS.escape(id) + '"]');
    const showError = (msg) => { errorBox.textContent = msg || ''; errorBox.hidden = !msg; };

    // The cells that change, by class, as the server draws them.
    function fill(tr, job) {
      const cell = (cls) => tr.querySelector('td.' + cls);
      tr.dataset.status = job.status;
      const [shape, cls] = BADGE[job.status] || ['', job.status];
      const status = cell('status');
      status.textContent = '';
      status.append(el('span', { class: 'badge ' + cls, 'data-status': job.status, text: shape + ' ' + job.status }));
      if (job.error) status.append(el('br'), el('small', { class: 'job-error', text: job.error }));
      const bar = cell('progress').querySelector('progress');
      bar.value = Math.max(0, Math.min(1, Number(job.progress) || 0));
      cell('progress').querySelector('.pct').textContent = Math.round(bar.value * 100) + ' %';
      const started = cell('started');
      started.textContent = '';
      started.append(job.started_at ? timeEl(job.started_at) : '\u2013');
      cell('duration').textContent = job.duration_seconds != null ? durationText(job.duration_seconds) : '\u2013';
      const model = cell('model');
      model.textContent = '';
      model.append(job.model_id ? el('a', { class: 'model-link', href: '/ml/models/' + encodeURIComponent(job.model_id), text: 'Open the model' }) : '\u2013');
      const actions = cell('actions');
      if (actions && FINISHED.indexOf(job.status) >= 0) actions.textContent = '';
    }
    // A row for a job the page did not have: the server's cells, then filled.
    function newRow(job, datasetName) {
      const td = (cls, kids) => el('td', { class: cls }, kids);
      const bar = el('progress', { max: '1', value: '0', 'aria-label': 'progress of ' + job.name });
      const tr = el('tr', { 'data-job-id': job.id, 'data-status': job.status }, [
        td('name', [job.name]),
        td('dataset', [el('a', { href: '/ml/datasets/' + encodeURIComponent(job.dataset_id), text: datasetName || job.dataset_id }), ' ',
          el('small', {}, [job.dataset_version ? el('code', { text: job.dataset_version }) : el('span', { class: 'quiet', text: 'working copy' })])]),
        td('status'), td('progress', [bar, ' ', el('span', { class: 'pct' })]), td('started'), td('duration num'), td('model'),
      ]);
      if (write) {
        const cancel = el('form', { class: 'api-form inline', 'data-method': 'DELETE', 'data-action': '/v1/ml/training/' + encodeURIComponent(job.id),
          'data-confirm': 'Cancel the training job \u201C' + job.name + '\u201D?' }, [el('button', { type: 'submit', class: 'danger', text: 'Cancel' })]);
        tr.append(td('actions', [cancel]));
      }
      fill(tr, job);
      return tr;
    }
    function update(job) {
      const tr = rowOf(job.id);
      if (tr) fill(tr, job);
      if (FINISHED.indexOf(job.status) >= 0) {
        if (active.delete(job.id)) hook.finished++;
      } else {
        follow(job.id);
      }
    }
    function follow(id) {
      active.add(id);
      if (!timer) timer = setTimeout(poll, delay);
    }
    // Each followed job read again; a 429 waits as long as the API says.
    async function poll() {
      timer = 0;
      delay = 1000;
      let failed = null;
      await Promise.all(Array.from(active).map(async (id) => {
        try {
          const job = await call('GET', '/v1/ml/training/' + encodeURIComponent(id));
          hook.polls++;
          update(job);
        } catch (err) {
          if (err.status === 404) { active.delete(id); return; }
          if (err.status === 429 && err.retry_after) delay = Math.max(delay, err.retry_after * 1000);
          failed = err;
        }
      }));
      showError(failed ? 'jobs could not be read: ' + failed.message + ' (trying again)' : null);
      if (active.size && !timer) timer = setTimeout(poll, failed ? Math.max(delay, 5000) : delay);
    }
    for (const tr of tbody.querySelectorAll('tr[data-job-id]')) {
      if (FINISHED.indexOf(tr.dataset.status) < 0) follow(tr.dataset.jobId);
    }
    // A Cancel's answer is the job: its row redrawn instead of a reload.
    jobsTable.addEventListener('api-form:success', (ev) => {
      if (ev.detail && ev.detail.id) { ev.preventDefault(); update(ev.detail); }
    });

    if (trainForm) {
      const select = trainForm.elements.namedItem('dataset_id');
      const features = document.getElementById('train-features');
      const boxes = document.getElementById('train-feature-boxes');
      // The chosen dataset's number columns, all ticked.
      const showColumns = () => {
        const option = select.selectedOptions[0];
        if (!option) return;
        let columns = [];
        try { columns = JSON.parse(option.dataset.columns || '[]'); } catch (e) { columns = []; }
        boxes.textContent = '';
        if (!columns.length) boxes.append(el('p', { class: 'quiet', text: 'This dataset has no number columns.' }));
        for (const c of columns) {
          boxes.append(el('label', { class: 'check' }, [el('input', { type: 'checkbox', name: 'features', 'data-type': 'list', value: c, checked: 'checked' }), ' ' + c]));
        }
        features.dataset.datasetId = select.value;
        const err = trainForm.querySelector('[data-error-for="features"]');
        if (err) err.textContent = '';
      };
      select.addEventListener('change', showColumns);
      if (features.dataset.datasetId !== select.value) showColumns();   // a browser that restored another choice
      // The answer is the queued job: its row on top, followed from now on.
      trainForm.addEventListener('api-form:success', (ev) => {
        const job = ev.detail;
        if (!job || !job.id) return;
        ev.preventDefault();
        for (const r of tbody.querySelectorAll('tr.empty')) r.remove();
        const option = select.selectedOptions[0];
        const tr = newRow(job, option && option.dataset.name);
        tbody.prepend(tr);
        tr.classList.add('flash');
        setTimeout(() => tr.classList.remove('flash'), 1500);
        document.getElementById('training-started').textContent = '\u201C' + job.name + '\u201D is queued; it runs on the next free node.';
        update(job);
      });
    }
  }

  // ---------- a model ----------
  const root = document.getElementById('model');
  if (!root) return;
  const base = '/v1/ml/models/' + encodeURIComponent(root.dataset.id);
  const featureValues = (form) => Array.from(form.querySelectorAll('input[data-feature]')).map((i) => [i.dataset.feature, i.value.trim(), i]);

  // A row tested: empty values are sent as null (the training median).
  const test = document.getElementById('model-test');
  if (test) {
    test.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearErrors(test);
      const out = document.getElementById('test-result');
      out.textContent = '';
      const features = {}, bad = [];
      for (const [name, raw] of featureValues(test)) {
        const n = Number(raw);
        if (raw !== '' && !isFinite(n)) bad.push({ field: 'features.' + name, message: 'must be a number' });
        features[name] = raw === '' ? null : n;
      }
      if (bad.length) { showErrors(test, { message: 'please correct the marked fields', details: bad }); return; }
      const button = test.querySelector('button[type="submit"]');
      button.disabled = true;
      try {
        const r = await call('POST', test.dataset.action, { features: features });
        const badge = r.is_anomaly ? el('span', { class: 'badge critical', 'data-anomaly': 'true', text: '\u25B2 anomaly' })
          : el('span', { class: 'badge ok', 'data-anomaly': 'false', text: '\u2713 normal' });
        out.append(el('p', { class: 'test-verdict' }, [badge, ' anomaly_score ',
          el('strong', { class: 'score', 'data-score': r.anomaly_score, text: fixed3(r.anomaly_score) }),
          ' \u00B7 is_anomaly ', el('code', { class: 'is-anomaly', text: String(r.is_anomaly) }),
          ' \u00B7 threshold ' + fixed3(r.threshold)]));
        hook.tests++;
      } catch (err) {
        showErrors(test, err);
      } finally {
        button.disabled = false;
      }
    });
  }

  // Deploy: {asset_ids, feature_tags}; an empty tag reads the feature's own name. The page is read again after.
  const deploy = document.getElementById('model-deploy');
  if (deploy) {
    deploy.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clearErrors(deploy);
      const assets = deploy.elements.namedItem('asset_ids').value.split(',').map((s) => s.trim()).filter(Boolean);
      const tags = {};
      for (const [name, raw] of featureValues(deploy)) if (raw) tags[name] = raw;
      const button = deploy.querySelector('button[type="submit"]');
      button.disabled = true;
      try {
        await call('POST', deploy.dataset.action, { asset_ids: assets, feature_tags: tags });
        window.location.reload();
      } catch (err) {
        showErrors(deploy, err);
        button.disabled = false;
      }
    });
  }

  // ---------- a deployed model: each asset's score over the last hour, and the open alerts on it ----------
  const live = document.getElementById('live-scores');
  if (!live) return;
  const scoreTag = live.dataset.scoreTag, threshold = Number(live.dataset.threshold);
  const HOUR = 3600000, EVERY = 5000, HEIGHT = 220;
  const liveError = document.getElementById('live-error');
  const showLiveError = (msg) => { liveError.textContent = msg || ''; liveError.hidden = !msg; };
  const css = (n) => getComputedStyle(document.documentElement).getPropertyValue('--' + n).trim() || '#777';
  const charts = Array.from(live.querySelectorAll('.score-asset[data-asset]')).map((box) => ({
    asset: box.dataset.asset, chartEl: box.querySelector('.score-chart'), noteEl: box.querySelector('.score-note'),
    alertsEl: box.querySelector('.score-alerts'), plot: null, view: null, alertSig: null, points: 0,
  }));

  function createPlot(c, data) {
    const axis = (extra) => Object.assign({ stroke: () => css('chart-axis'), grid: { stroke: () => css('chart-grid'), width: 1 },
      ticks: { stroke: () => css('chart-grid'), width: 1 } }, extra);
    const opts = {
      width: Math.max(300, c.chartEl.clientWidth), height: HEIGHT, legend: { live: true },
      scales: { x: { time: true, range: () => [c.view.start / 1000, c.view.end / 1000] }, y: { range: () => [0, 1] } },
      axes: [axis(), axis({ size: 48 })],
      series: [{ value: (u, v) => v == null ? '\u2013' : new Date(v * 1000).toLocaleString() },
        { label: 'anomaly score', stroke: () => css('trend-1'), width: 1.5, spanGaps: false, value: (u, v) => fixed3(v) }],
      hooks: { draw: [(u) => {                          // the threshold: a dashed horizontal line
        if (!isFinite(threshold)) return;
        const y = Math.round(u.valToPos(threshold, 'y', true)) + 0.5, b = u.bbox, ctx = u.ctx, dpr = window.devicePixelRatio || 1;
        ctx.save();
        ctx.strokeStyle = css('critical'); ctx.lineWidth = 1.5 * dpr; ctx.setLineDash([6 * dpr, 4 * dpr]);
        ctx.beginPath(); ctx.moveTo(b.left, y); ctx.lineTo(b.left + b.width, y); ctx.stroke();
        ctx.setLineDash([]); ctx.fillStyle = css('critical'); ctx.font = (11 * dpr) + 'px system-ui, sans-serif'; ctx.textAlign = 'right';
        ctx.fillText('threshold ' + fixed3(threshold), b.left + b.width - 4 * dpr, y - 4 * dpr);
        ctx.restore();
      }] },
    };
    c.plot = new window.uPlot(opts, data, c.chartEl);
    hook.charts++;
  }
  // The series of the score tag; downsampled buckets draw their highest score (a spike must not average away).
  async function loadSeries(c, start, end) {
    c.view = { start: start, end: end };
    const width = Math.max(100, Math.min(10000, Math.round(c.chartEl.clientWidth || 600)));
    const q = new URLSearchParams({ asset_id: c.asset, tags: scoreTag, start: new Date(start).toISOString(), end: new Date(end).toISOString(), width: String(width) });
    const data = await call('GET', '/v1/telemetry/series?' + q);
    const s = ((data && data.series) || []).find((x) => x.tag_name === scoreTag) || {};
    const t = s.t || [], v = (s.downsampled ? s.max : s.value) || [];
    const above = v.filter((x) => x > threshold).length;
    const plotData = [t.map((ms) => ms / 1000), v];
    if (c.plot) c.plot.setData(plotData); else createPlot(c, plotData);
    c.points = t.length;
    hook.points = charts.reduce((n, x) => n + (x.points || 0), 0);
    c.noteEl.textContent = !t.length ? 'No scores in the last hour yet: they come as the features\u2019 tags arrive.'
      : (s.downsampled ? 'the highest score per ' + Math.round(s.bucket_ms / 1000) + ' s, of ' + s.points + ' scores' : s.points + ' scores')
        + ' \u00B7 ' + (s.downsampled ? above + ' buckets' : above + ' scores') + ' above the threshold';
  }
  function alertItem(a) {
    const shape = { critical: '\u25B2', warning: '\u25C6', info: '\u25CF' }[a.severity] || '';
    return el('li', { 'data-alert-id': a.id, 'data-status': a.status }, [
      el('span', { class: 'badge ' + a.severity, text: shape + ' ' + a.severity }), ' ',
      el('span', { class: 'badge ' + (a.status === 'active' ? 'active' : 'acknowledged'), text: a.status }), ' ',
      el('a', { href: '/alerts', text: a.title || a.rule_name || 'alert' }),
      a.value != null ? ' \u00B7 score ' + fixed3(a.value) : '', ' \u00B7 since ', timeEl(a.triggered_at),
    ]);
  }
  // Open alerts: GET /v1/alerts filters by status only, so the score tag and the asset are picked here.
  async function loadAlerts() {
    const lists = await Promise.all(['active', 'acknowledged'].map((s) =>
      call('GET', '/v1/alerts?' + new URLSearchParams({ status: s, per_page: '100' }))));
    const open = [].concat(lists[0] || [], lists[1] || []).filter((a) => a.tag_name === scoreTag);
    for (const c of charts) {
      const mine = open.filter((a) => a.asset_id === c.asset);
      const sig = mine.map((a) => a.id + a.status).join('|');
      if (sig === c.alertSig) continue;
      c.alertSig = sig;
      c.alertsEl.textContent = '';
      if (!mine.length) c.alertsEl.append(el('li', { class: 'quiet', text: 'None.' }));
      for (const a of mine) c.alertsEl.append(alertItem(a));
    }
  }
  async function refresh() {
    const end = Date.now(), start = end - HOUR;
    try {
      if (typeof window.uPlot !== 'function') throw { message: 'the chart library (uPlot) did not load' };
      await Promise.all(charts.map((c) => loadSeries(c, start, end)));
      await loadAlerts();
      hook.refreshes++;
      showLiveError(null);
    } catch (err) {
      showLiveError('the live scores could not be read: ' + ((err && err.message) || String(err)) + ' (trying again)');
    }
    setTimeout(refresh, EVERY);
  }
  window.addEventListener('resize', () => {
    for (const c of charts) if (c.plot) c.plot.setSize({ width: Math.max(300, c.chartEl.clientWidth), height: HEIGHT });
  });
  refresh();
})();
