// The console's only script. Everything it shows came from a model, a
// tool or a gateway: it builds elements and sets textContent, never
// innerHTML, and the page's CSP allows no other script.
"use strict";

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

// vis is text as the other pages show a value: every character outside
// printable ASCII (and every lone surrogate) as a marker that names it
// (names: the server's markers by code point), every run of four or more
// spaces as a counted marker, so that what a page draws is what the value
// holds.
function vis(text, names) {
  const e = el("span", null, "vis");
  let plain = "";
  const flush = () => { if (plain) { e.appendChild(document.createTextNode(plain)); plain = ""; } };
  const s = String(text);
  for (let i = 0; i < s.length;) {
    const cp = s.codePointAt(i), len = cp > 0xffff ? 2 : 1;
    if (cp === 0x20) {
      let n = 0;
      while (s.charCodeAt(i + n) === 0x20) n++;
      if (n >= 4) { flush(); e.appendChild(el("span", "\u27e6" + n + " spaces\u27e7", "mark")); }
      else plain += " ".repeat(n);
      i += n;
      continue;
    }
    if (cp < 0x20 || cp > 0x7e) {
      flush();
      const hex = cp.toString(16), u = "U+" + hex.toUpperCase().padStart(4, "0");
      let name = names && names[hex];
      if (!name) name = "\u27e6" + u + (cp >= 0xd800 && cp <= 0xdfff ? " LONE SURROGATE, not a character" : "") + "\u27e7";
      // A run of one character is one counted marker, as on the
      // server's pages.
      let n = 1;
      while (i + n * len < s.length && s.codePointAt(i + n * len) === cp) n++;
      if (n > 1) name = "\u27e6" + n + " \u00d7 " + name.slice(1);
      e.appendChild(el("span", name, "mark"));
      i += n * len;
      continue;
    } else {
      plain += s[i];
    }
    i += len;
  }
  flush();
  return e;
}

// pretty draws a JSON value as the server's pages show arguments:
// indented with spaces, each string between quotes, its quotes and
// backslashes escaped as JSON spells them and every other character
// through vis, so that a newline or a control inside a string is its
// named marker (never a \n or \u001b to decode, as JSON.stringify
// would write it).
function pretty(v, names) {
  const e = el("span", null, "vis pre");
  const text = (t) => e.appendChild(document.createTextNode(t));
  const str = (s) => {
    text("\"");
    for (const p of String(s).split(/(["\\])/)) {
      if (p === "\"" || p === "\\") text("\\" + p);
      else if (p) e.appendChild(vis(p, names));
    }
    text("\"");
  };
  const walk = (v, ind) => {
    if (typeof v === "string") return str(v);
    if (v === null || typeof v !== "object") return text(String(JSON.stringify(v)));
    const arr = Array.isArray(v), keys = arr ? v.map((_, i) => i) : Object.keys(v);
    if (keys.length === 0) return text(arr ? "[]" : "{}");
    text(arr ? "[\n" : "{\n");
    keys.forEach((k, i) => {
      text(ind + "  ");
      if (!arr) { str(k); text(": "); }
      walk(v[k], ind + "  ");
      text(i < keys.length - 1 ? ",\n" : "\n");
    });
    text(ind + (arr ? "]" : "}"));
  };
  walk(v, "");
  return e;
}

function left(ms) {
  if (ms <= 0) return "expired: the workers answer it rejected";
  const s = Math.floor(ms / 1000), h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60;
  if (h > 0) return h + "h " + String(m).padStart(2, "0") + "m left";
  if (m > 0) return m + "m " + String(s % 60).padStart(2, "0") + "s left";
  return s + "s left";
}

function approvals() {
  const tick = () => {
    for (const e of document.querySelectorAll("[data-expires]")) {
      e.textContent = left(Date.parse(e.dataset.expires) - Date.now());
    }
  };
  tick();
  setInterval(tick, 1000);
  // A reject needs no reason, but a reason typed means reject unless
  // approve was chosen.
  for (const f of document.querySelectorAll("fieldset.held")) {
    const reason = f.querySelector(".reason input"), reject = f.querySelector("input.reject"), approve = f.querySelector("input.approve");
    reason.addEventListener("input", () => { if (!approve.checked) reject.checked = true; });
  }
}

function live() {
  const params = new URLSearchParams();
  for (const k of ["agent", "turn", "key"]) {
    const v = document.getElementById("f-" + k).value;
    if (v) params.set(k, v);
  }
  const body = document.getElementById("events"), state = document.getElementById("live-state");
  const src = new EventSource("/api/live?" + params.toString());
  src.onopen = () => { state.textContent = "live"; };
  src.onerror = () => { state.textContent = "disconnected, retrying…"; };
  src.addEventListener("lost", (m) => { state.textContent = "live (" + m.data + " events dropped: this page was too slow)"; });
  src.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    const e = ev.event || {}, names = ev.names || {};
    const cell = (text) => { const td = el("td"); td.appendChild(vis(text, names)); return td; };
    const tr = el("tr", null, ev.source + " " + (e.type || e.state || ""));
    tr.appendChild(el("td", new Date(ev.time).toISOString().slice(11, 23)));
    tr.appendChild(cell(ev.agent_id + "/" + ev.turn_id + (ev.key !== ev.agent_id ? " [" + ev.key + "]" : "")));
    tr.appendChild(cell(e.step !== undefined ? e.step : ""));
    tr.appendChild(cell(ev.source === "activity" ? "activity" : (e.type || "?")));
    tr.appendChild(cell(e.call_id || ""));
    tr.appendChild(cell((e.namespace ? e.namespace + "." : "") + (e.name || "")));
    let status = "";
    if (ev.source === "activity") {
      status = (e.state || "") + (e.label ? ": " + e.label : "");
      if (e.progress) status += " (" + e.progress.done + (e.progress.total ? " of " + e.progress.total : "") + ")";
    } else if (e.type === "call.output") {
      status = (e.status || "") + (e.error && e.error.kind ? " " + e.error.kind : "") + (e.duration_ms !== undefined ? " · " + e.duration_ms + " ms" : "");
    } else if (e.type === "step.done") {
      status = (e.items ? e.items.length : 0) + " outputs" + (e.end_turn ? " · end_turn" : "");
    } else if (e.type === "step.pending") {
      status = (e.approvals ? e.approvals.length : 0) + " held for approval";
    }
    tr.appendChild(cell(status));
    const td = el("td");
    const d = el("details");
    d.appendChild(el("summary", "JSON"));
    const pre = el("pre");
    pre.appendChild(pretty(e, names));
    d.appendChild(pre);
    td.appendChild(d);
    tr.appendChild(td);
    body.insertBefore(tr, body.firstChild);
    while (body.children.length > 500) body.removeChild(body.lastChild);
  };
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "approvals") approvals();
  if (page === "live") live();
  if (page === "fleet") setTimeout(() => location.reload(), 5000);
});
