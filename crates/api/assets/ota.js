// plantd console, OTA pages: the package upload with its progress (multipart, streamed by the browser), and a
// deployment's phases and devices kept current while it runs (read from /v1 every 2 s; device steps are not
// stream events, so the page asks).
(function () {
  'use strict';
  const hook = { polls: 0 };
  window.plantdOta = hook;

  // ---------- the upload ----------
  const form = document.getElementById('package-upload');
  if (form) {
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      for (const e of form.querySelectorAll('[data-error-for], .form-error')) e.textContent = '';
      const bar = document.getElementById('pkg-progress');
      const data = new FormData();
      for (const name of ['version', 'name', 'device_type', 'release_notes']) {
        const v = form.elements.namedItem(name).value.trim();
        if (v) data.append(name, v);
      }
      const file = form.elements.namedItem('file').files[0];
      if (file) data.append('file', file, file.name);
      const xhr = new XMLHttpRequest();
      xhr.open('POST', '/v1/ota/packages');
      xhr.setRequestHeader('Accept', 'application/json');
      bar.hidden = false;
      bar.value = 0;
      xhr.upload.onprogress = (e) => { if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100); };
      const button = form.querySelector('button[type="submit"]');
      button.disabled = true;
      xhr.onloadend = () => {
        button.disabled = false;
        if (xhr.status === 201) { window.location.reload(); return; }
        let err = null;
        try { err = JSON.parse(xhr.responseText).error; } catch (e) { /* not JSON */ }
        err = err || { message: xhr.status ? 'the upload failed: HTTP ' + xhr.status : 'cannot reach the server' };
        for (const d of err.details || []) {
          const t = form.querySelector('[data-error-for="' + CSS.escape(d.field) + '"]');
          if (t) t.textContent = d.message;
        }
        form.querySelector('.form-error').textContent = err.message;
        bar.hidden = true;
      };
      xhr.send(data);
    });
  }

  // ---------- a deployment, live ----------
  const root = document.getElementById('deployment');
  if (!root || root.dataset.active !== 'true') return;
  const id = root.dataset.id;
  async function get(path) {
    const r = await fetch(path, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    if (!r.ok) throw new Error('HTTP ' + r.status);
    return r.json();
  }
  async function poll() {
    hook.polls++;
    const d = (await get('/v1/ota/deployments/' + encodeURIComponent(id))).data;
    const badge = document.querySelector('#deployment-status .badge');
    if (badge && badge.dataset.status !== d.status) {
      // A new status brings other actions (continue, cancel): the server draws them.
      window.location.reload();
      return false;
    }
    for (const p of d.phase_progress) {
      const row = document.querySelector('#phases tr[data-phase="' + p.phase + '"]');
      if (!row) continue;
      row.classList.toggle('current', p.phase === d.current_phase);
      for (const k of ['devices', 'succeeded', 'failed', 'open']) {
        const cell = row.querySelector('[data-count="' + k + '"]');
        if (cell) cell.textContent = String(p[k]);
      }
    }
    for (let page = 1; page <= 5; page++) {
      const list = await get('/v1/ota/deployments/' + encodeURIComponent(id) + '/devices?per_page=100&page=' + page);
      for (const x of list.data) {
        const row = document.querySelector('#deployment-devices tr[data-device-id="' + CSS.escape(x.device_id) + '"]');
        if (!row) continue;
        const cell = row.querySelector('[data-state]');
        if (cell.dataset.state !== x.state) {
          cell.dataset.state = x.state;
          const b = cell.querySelector('.badge');
          b.textContent = x.state;
          b.className = 'badge ' + ({ succeeded: 'ok', failed: 'critical', rolled_back: 'warning', rolling_back: 'warning', cancelled: 'revoked', pending: 'stale' }[x.state] || 'active');
        }
        row.cells[3].textContent = x.message || '';
      }
      if (page * 100 >= list.meta.total) break;
    }
    return true;
  }
  async function loop() {
    let again = true;
    try { again = await poll(); } catch (e) { /* the next round tries again */ }
    if (again) setTimeout(loop, 2000);
  }
  setTimeout(loop, 2000);
})();
