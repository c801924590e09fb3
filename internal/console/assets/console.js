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
    const e = ev.event || {};
    const tr = el("tr", null, ev.source + " " + (e.type || e.state || ""));
    tr.appendChild(el("td", new Date(ev.time).toISOString().slice(11, 23)));
    tr.appendChild(el("td", ev.agent_id + "/" + ev.turn_id + (ev.key !== ev.agent_id ? " [" + ev.key + "]" : "")));
    tr.appendChild(el("td", e.step !== undefined ? e.step : ""));
    tr.appendChild(el("td", ev.source === "activity" ? "activity" : (e.type || "?")));
    tr.appendChild(el("td", e.call_id || ""));
    tr.appendChild(el("td", (e.namespace ? e.namespace + "." : "") + (e.name || "")));
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
    tr.appendChild(el("td", status));
    const td = el("td");
    const d = el("details");
    d.appendChild(el("summary", "JSON"));
    d.appendChild(el("pre", JSON.stringify(e, null, 2)));
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
