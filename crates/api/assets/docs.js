// The API reference page (/v1/docs): renders /v1/openapi.json, offline.
(async () => {
  const res = await fetch('openapi.json');
  const doc = await res.json();
  const esc = s => String(s ?? '').replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
  const schemas = (doc.components || {}).schemas || {};
  const resolve = (s, depth = 0) => {
    if (!s || depth > 6) return s;
    if (s.$ref) return resolve(schemas[s.$ref.split('/').pop()], depth + 1);
    const out = Array.isArray(s) ? [] : {};
    for (const [k, v] of Object.entries(s)) out[k] = (v && typeof v === 'object') ? resolve(v, depth + 1) : v;
    return out;
  };
  const shape = s => JSON.stringify(resolve(s), null, 2);
  document.getElementById('title').textContent = doc.info.title + ' ' + doc.info.version;
  document.getElementById('desc').textContent = doc.info.description || '';
  const byTag = {};
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags || ['other'])[0];
      (byTag[tag] = byTag[tag] || []).push({ path, method, op });
    }
  }
  let nav = '', html = '';
  for (const [tag, ops] of Object.entries(byTag).sort()) {
    nav += `<h3>${esc(tag)}</h3>`;
    html += `<h2 class="tag">${esc(tag)}</h2>`;
    for (const { path, method, op } of ops) {
      const id = (method + path).replace(/[^a-z0-9]/gi, '-');
      nav += `<a href="#${id}">${method.toUpperCase()} ${esc(path)}</a>`;
      const params = (op.parameters || []).map(p =>
        `<tr><td><code>${esc(p.name)}</code></td><td>${esc(p.in)}</td><td>${p.required ? 'required' : ''}</td><td>${esc(p.description || '')}</td></tr>`).join('');
      const body = op.requestBody ? Object.values(op.requestBody.content || {})[0] : null;
      const shared = (doc.components || {}).responses || {};
      const responses = Object.entries(op.responses || {}).map(([code, ref]) => {
        const r = ref.$ref ? (shared[ref.$ref.split('/').pop()] || {}) : ref;
        const c = Object.values(r.content || {})[0];
        return `<tr><td><b>${code}</b></td><td>${esc(r.description || '')}${c && c.schema ? `<details><summary>schema</summary><pre>${esc(shape(c.schema))}</pre></details>` : ''}</td></tr>`;
      }).join('');
      html += `<div class="op" id="${id}"><div><span class="m ${method}">${method.toUpperCase()}</span><code>${esc(path)}</code>
        <span class="scope"> &middot; scope: ${esc(op['x-required-scope'] || '')}</span></div>
        <p>${esc(op.summary || '')}</p><p>${esc((op.description || '').replace(/\*\*/g, ''))}</p>
        ${params ? `<h4>Parameters</h4><table>${params}</table>` : ''}
        ${body && body.schema ? `<h4>Request body</h4><pre>${esc(shape(body.schema))}</pre>` : ''}
        <h4>Responses</h4><table>${responses}</table></div>`;
    }
  }
  document.getElementById('nav').innerHTML = nav;
  document.getElementById('ops').innerHTML = html;
})().catch(e => { document.getElementById('ops').textContent = 'Could not load openapi.json: ' + e; });
