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

// segs appends a line the server rendered: each segment [class, text]
// is plain text (class "") or a marker, as the server's pages draw them
// (render.go: every character outside printable ASCII named, counted
// runs, notes on numbers).
function segs(parent, line) {
  for (const [cls, text] of line) parent.appendChild(cls ? el("span", text, cls) : document.createTextNode(text));
}

// cell is a short value (one line) as the server's "vis" template
// draws it.
function cell(v) {
  const td = el("td"), e = el("span", null, "vis");
  for (const line of v.lines) segs(e, line);
  if (v.left_out) e.appendChild(el("span", "[\u2026 " + v.left_out + " bytes not shown \u2026]", "leftout"));
  td.appendChild(e);
  return td;
}

// block is a JSON value as the server's "args" template draws it.
function block(v) {
  const e = el("div", null, "args");
  for (const line of v.lines) {
    const ln = el("div", null, "ln");
    segs(ln, line);
    e.appendChild(ln);
  }
  if (v.left_out) e.appendChild(el("p", "[\u2026 " + v.left_out + " of " + v.total + " bytes not shown here \u2026]", "leftout"));
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
  // Each event comes rendered by the server (live.go): the script
  // parses no value of it, it only draws the segments.
  src.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch { return; }
    const tr = el("tr", null, ev.source + (ev.type ? " " + ev.type : ""));
    tr.appendChild(el("td", new Date(ev.time).toISOString().slice(11, 23)));
    for (const c of ev.cells) tr.appendChild(cell(c));
    const td = el("td"), d = el("details");
    d.appendChild(el("summary", "JSON"));
    d.appendChild(block(ev.json));
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
