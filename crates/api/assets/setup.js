// plantd console, the edge agent's setup wizard (/setup), step 4: a template's asset as one CSV line posted to
// /v1/provisioning/import/csv (asset_id, asset_type, protocol, host, port, sensors: the template's sensors by name
// for OPC UA, name:register for Modbus); a refusal lists each bad field, a success says what it made.
(function () {
  'use strict';
  const hook = { added: 0 };
  window.plantdSetup = hook;
  const form = document.getElementById('setup-template');
  if (!form) return;
  const protocol = form.elements.namedItem('protocol'), port = form.elements.namedItem('port');
  protocol.addEventListener('change', () => {
    if (port.value === '4840' || port.value === '502' || port.value === '') port.value = protocol.value === 'modbus' ? '502' : '4840';
  });
  // A CSV cell: quoted when it holds a comma, a quote or a line break.
  function cell(v) {
    const s = String(v);
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    for (const e of form.querySelectorAll('.form-error, output')) e.textContent = '';
    const list = form.querySelector('.upload-errors');
    list.textContent = ''; list.hidden = true;
    const option = form.elements.namedItem('template').selectedOptions[0];
    const modbus = protocol.value === 'modbus';
    const line = [form.elements.namedItem('asset_id').value.trim(), option.value, protocol.value,
      form.elements.namedItem('host').value.trim(), port.value.trim(),
      modbus ? option.dataset.modbus : option.dataset.sensors].map(cell).join(',');
    const csv = 'asset_id,asset_type,protocol,host,port,sensors\n' + line + '\n';
    const button = form.querySelector('button[type="submit"]');
    button.disabled = true;
    try {
      const r = await fetch('/v1/provisioning/import/csv', {
        method: 'POST', credentials: 'same-origin', body: csv,
        headers: { 'Content-Type': 'text/csv', Accept: 'application/json' },
      });
      const body = await r.json().catch(() => null);
      if (r.ok && body) {
        hook.added++;
        form.querySelector('output').textContent = '\u2713 ' + form.elements.namedItem('asset_id').value.trim() +
          ' added (' + body.data.created + ' new, ' + body.data.updated + ' updated): see it on the Provisioning page.';
      } else {
        const err = (body && body.error) || { message: 'the request failed: HTTP ' + r.status };
        for (const d of err.details || []) {
          const li = document.createElement('li');
          li.textContent = (d.field ? d.field.replace(/^line 2\./, '') + ': ' : '') + d.message;
          list.append(li);
          list.hidden = false;
        }
        form.querySelector('.form-error').textContent = err.message || 'the asset could not be added';
      }
    } catch (e) {
      form.querySelector('.form-error').textContent = 'cannot reach the server';
    } finally {
      button.disabled = false;
    }
  });
})();
