// plantd console, provisioning page: a CSV or YAML file imported (multipart to /v1/provisioning/import/csv or
// yaml, chosen by the file's name), a QR label's payload posted as JSON; a refused import lists each bad line or
// field, a good one says what it made and the page shows the new list. An admin scans named addresses for devices
// (/v1/api/discover/scan) and sees what answered.
(function () {
  'use strict';
  const hook = { imports: 0 };
  window.plantdProvisioning = hook;

  function clear(form) {
    for (const e of form.querySelectorAll('[data-error-for], .form-error, output')) e.textContent = '';
    for (const l of form.querySelectorAll('.upload-errors')) { l.textContent = ''; l.hidden = true; }
  }
  // Each detail of a refusal as a line of the form's list (`line 3.port: '70000' is not a port`).
  function refused(form, err) {
    const list = form.querySelector('.upload-errors');
    for (const d of err.details || []) {
      const li = document.createElement('li');
      li.textContent = d.field ? d.field + ': ' + d.message : d.message;
      list.append(li);
      list.hidden = false;
    }
    form.querySelector('.form-error').textContent = err.message || 'the import failed';
  }
  function done(form, report) {
    hook.imports++;
    form.querySelector('output').textContent = 'Imported ' + report.imported + ' asset' + (report.imported === 1 ? '' : 's') +
      ' (' + report.created + ' new, ' + report.updated + ' updated).';
    setTimeout(() => window.location.reload(), 800);
  }
  async function send(form, path, init) {
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      const r = await fetch(path, Object.assign({ method: 'POST', credentials: 'same-origin' }, init));
      let body = null;
      try { body = await r.json(); } catch (e) { /* not JSON */ }
      if (r.ok && body) done(form, body.data);
      else refused(form, (body && body.error) || { message: 'the import failed: HTTP ' + r.status });
    } catch (e) {
      refused(form, { message: 'cannot reach the server' });
    } finally {
      button.disabled = false;
    }
  }

  const file = document.getElementById('provision-file');
  if (file) {
    file.addEventListener('submit', (ev) => {
      ev.preventDefault();
      clear(file);
      const f = file.elements.namedItem('file').files[0];
      if (!f) return;
      const yaml = /\.ya?ml$/i.test(f.name);
      const data = new FormData();
      data.append('file', f, f.name);
      send(file, '/v1/provisioning/import/' + (yaml ? 'yaml' : 'csv'), { body: data, headers: { Accept: 'application/json' } });
    });
  }

  // Discovery: the hosts and ports as typed, split on spaces and commas; what answered in a table.
  const discover = document.getElementById('discover');
  if (discover) {
    discover.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      clear(discover);
      const words = (name) => discover.elements.namedItem(name).value.split(/[\s,]+/).filter((w) => w);
      const body = { hosts: words('hosts') };
      const ports = words('ports').map((p) => (/^\d+$/.test(p) ? Number(p) : p));
      if (ports.length) body.ports = ports;
      const button = discover.querySelector('button[type="submit"]');
      button.disabled = true;
      try {
        const r = await fetch('/v1/api/discover/scan', {
          method: 'POST', credentials: 'same-origin', body: JSON.stringify(body),
          headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
        });
        let answer = null;
        try { answer = await r.json(); } catch (e) { /* not JSON */ }
        if (!r.ok || !answer) {
          refused(discover, (answer && answer.error) || { message: 'the scan failed: HTTP ' + r.status });
          return;
        }
        const report = answer.data;
        hook.scans = (hook.scans || 0) + 1;
        discover.querySelector('output').textContent = report.found.length + ' found among ' +
          report.scanned_addresses + ' address' + (report.scanned_addresses === 1 ? '' : 'es') + ' in ' + report.duration_ms + ' ms' +
          (report.unresolved.length ? ' (not resolved: ' + report.unresolved.join(', ') + ')' : '') + '.';
        const table = document.getElementById('discovered');
        const rows = table.querySelector('tbody');
        rows.textContent = '';
        for (const f of report.found) {
          const tr = document.createElement('tr');
          for (const text of [f.protocol, f.host + ':' + f.port, JSON.stringify(f.identity)]) {
            const td = document.createElement('td');
            td.textContent = text;
            tr.append(td);
          }
          rows.append(tr);
        }
        table.hidden = report.found.length === 0;
      } catch (e) {
        refused(discover, { message: 'cannot reach the server' });
      } finally {
        button.disabled = false;
      }
    });
  }

  const qr = document.getElementById('provision-qr');
  if (qr) {
    qr.addEventListener('submit', (ev) => {
      ev.preventDefault();
      clear(qr);
      const text = qr.elements.namedItem('payload').value.trim();
      try { JSON.parse(text); } catch (e) {
        refused(qr, { message: 'the payload is not JSON: ' + e.message });
        return;
      }
      send(qr, '/v1/provisioning/import/qr', {
        body: text,
        headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
      });
    });
  }
})();
