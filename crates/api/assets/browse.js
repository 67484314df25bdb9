// plantd console: a data source's browse page (/data-sources/{id}). What the device offers,
// level by level, from GET /v1/data-sources/{id}/browse, and choosing what is collected:
// OPC UA variables ticked in the tree are saved as config.nodes (an empty list: everything
// under the root node); MQTT topics ticked after listening replace config.topics; a Modbus
// source shows its register map. Saving sends the source's config back with PUT (a stored
// password is kept by the API when none is sent).
(function () {
  'use strict';
  const root = document.getElementById('browse');
  if (!root) return;
  const id = root.dataset.sourceId, kind = root.dataset.type;
  const api = '/v1/data-sources/' + encodeURIComponent(id);
  const errorBox = document.getElementById('browse-error');
  const status = document.getElementById('browse-status');

  function el(tag, props, children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'text') e.textContent = v;
      else if (k === 'class') e.className = v;
      else e.setAttribute(k, v);
    }
    for (const c of children || []) e.append(c);
    return e;
  }
  function say(text) { status.textContent = text; }
  function fail(err) { errorBox.textContent = (err && err.message) || String(err); }
  async function call(method, path, body) {
    const init = { method: method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    const res = await fetch(path, init);
    const answer = await res.json().catch(() => null);
    if (!res.ok) throw (answer && answer.error) || new Error('HTTP ' + res.status);
    return answer && answer.data;
  }
  async function source() { return call('GET', api); }
  async function saveConfig(change) {
    errorBox.textContent = '';
    const current = await source();
    const config = Object.assign({}, current.config, change);
    delete config.password_set;
    await call('PUT', api, { config: config });
  }

  // ---------- OPC UA: a tree, opened level by level ----------
  async function opcua() {
    const tree = document.getElementById('browse-tree');
    const save = document.getElementById('browse-save'), auto = document.getElementById('browse-auto');
    const mode = document.getElementById('browse-mode');
    const chosen = new Map();                          // node_id -> {node_id, asset_id, tag_name}
    let listed = false;                                // the source collects a node list
    function showMode() {
      mode.textContent = listed
        ? 'Collected now: the ' + chosen.size + ' variables listed in the source (config.nodes).'
        : 'Collected now: every number and boolean under the root node (no node list).';
      save.textContent = 'Collect the ' + chosen.size + ' ticked variables';
      save.disabled = chosen.size === 0;
    }
    function item(e) {
      const li = el('li', { role: 'treeitem', 'data-node': e.node_id });
      const label = e.display_name + (e.display_name !== e.browse_name ? ' (' + e.browse_name + ')' : '');
      if (e.has_children) {
        const toggle = el('button', { type: 'button', class: 'tree-toggle', 'aria-expanded': 'false', text: '\u25B8 ' + label });
        const children = el('ul', { role: 'group', hidden: '' });
        toggle.addEventListener('click', async () => {
          const open = toggle.getAttribute('aria-expanded') === 'true';
          toggle.setAttribute('aria-expanded', String(!open));
          toggle.textContent = (open ? '\u25B8 ' : '\u25BE ') + label;
          children.hidden = open;
          if (!open && !children.dataset.loaded) {
            children.dataset.loaded = 'true';
            await level(e.node_id, children);
          }
        });
        li.append(toggle, children);
      } else {
        const box = el('input', { type: 'checkbox', id: 'n-' + e.node_id, 'data-node': e.node_id });
        box.checked = listed ? chosen.has(e.node_id) : e.collected;
        if (!listed && e.collected) chosen.set(e.node_id, { node_id: e.node_id, asset_id: e.asset_id, tag_name: e.tag_name });
        if (e.numeric === false) box.disabled = true;
        box.addEventListener('change', () => {
          if (box.checked) chosen.set(e.node_id, { node_id: e.node_id, asset_id: e.asset_id, tag_name: e.tag_name });
          else chosen.delete(e.node_id);
          showMode();
        });
        const text = el('label', { for: box.id, text: label });
        const meta = el('small', { class: 'quiet', text: ' ' + (e.data_type || 'unknown type') + (e.numeric === false ? ' (not a number: not collected)' : ' \u2192 ' + e.asset_id + ' / ' + e.tag_name) });
        li.append(box, ' ', text, meta);
        if (e.collected) li.append(' ', el('span', { class: 'badge ok', text: '\u25CF collected' }));
      }
      return li;
    }
    async function level(node, into) {
      say('Asking the server\u2026');
      try {
        const entries = await call('GET', api + '/browse' + (node ? '?node=' + encodeURIComponent(node) : ''));
        into.textContent = '';
        if (!entries.length) into.append(el('li', { class: 'quiet', text: 'Nothing under this node.' }));
        for (const e of entries) into.append(item(e));
        say(entries.length + ' entries.');
        showMode();
      } catch (e) { say(''); fail(e); }
    }
    try {
      const s = await source();
      const nodes = (s.config && s.config.nodes) || [];
      listed = nodes.length > 0;
      for (const n of nodes) chosen.set(n.node_id, n);
    } catch (e) { fail(e); }
    showMode();
    save.addEventListener('click', async () => {
      try { await saveConfig({ nodes: Array.from(chosen.values()) }); window.location.reload(); } catch (e) { fail(e); }
    });
    auto.addEventListener('click', async () => {
      try { await saveConfig({ nodes: [] }); window.location.reload(); } catch (e) { fail(e); }
    });
    await level(null, tree);
  }

  // ---------- MQTT: the topics heard while listening ----------
  function mqtt() {
    const form = document.getElementById('browse-listen'), save = document.getElementById('browse-save');
    const body = document.querySelector('#browse-topics tbody');
    const chosen = new Set();
    function showSave() { save.textContent = 'Collect the ' + chosen.size + ' ticked topics'; save.disabled = chosen.size === 0; }
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      errorBox.textContent = '';
      const filter = form.elements.namedItem('node').value || '#';
      const seconds = form.elements.namedItem('listen_seconds').value || '5';
      const button = form.querySelector('button');
      button.disabled = true;
      say('Listening for ' + seconds + ' s\u2026');
      try {
        const entries = await call('GET', api + '/browse?node=' + encodeURIComponent(filter) + '&listen_seconds=' + encodeURIComponent(seconds));
        body.textContent = '';
        chosen.clear();
        for (const e of entries) {
          const box = el('input', { type: 'checkbox', 'data-topic': e.node_id, 'aria-label': 'collect ' + e.node_id });
          box.checked = e.collected;
          if (e.collected) chosen.add(e.node_id);
          box.addEventListener('change', () => { if (box.checked) chosen.add(e.node_id); else chosen.delete(e.node_id); showSave(); });
          const t = el('time', { datetime: e.seen_at, text: new Date(e.seen_at).toLocaleTimeString() });
          body.append(el('tr', { 'data-topic': e.node_id }, [
            el('td', {}, [box]), el('td', {}, [el('code', { text: e.node_id })]),
            el('td', {}, [el('small', { text: '(' + e.data_type + ') ' + e.sample })]),
            el('td', { class: 'num', text: String(e.messages) }), el('td', {}, [t])]));
        }
        say(entries.length + ' topics heard.');
        showSave();
      } catch (e) { say(''); fail(e); } finally { button.disabled = false; }
    });
    save.addEventListener('click', async () => {
      try { await saveConfig({ topics: Array.from(chosen) }); say('Saved: the connector now subscribes to the ticked topics.'); } catch (e) { fail(e); }
    });
  }

  // ---------- Modbus: the register map ----------
  async function modbus() {
    const body = document.querySelector('#browse-registers tbody');
    try {
      const entries = await call('GET', api + '/browse');
      for (const e of entries) {
        body.append(el('tr', {}, [el('td', { text: e.display_name }), el('td', { text: e.data_type }),
          el('td', { text: e.asset_id || '' }), el('td', { text: e.tag_name || '' })]));
      }
      say(entries.length + ' registers.');
    } catch (e) { fail(e); }
  }

  if (kind === 'opcua') opcua();
  else if (kind === 'mqtt') mqtt();
  else modbus();
})();
