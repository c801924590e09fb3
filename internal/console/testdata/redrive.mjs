// Drives the dead letters in Chromium for TestBrowserRedriveShowsAll
// (redrive_browser_test.go): on the list and on each letter's own page,
// wherever a Re-drive button is offered it measures whether every
// character of the payload and of the headers is drawn, inside the
// viewport, above the button; it presses every button offered and
// reports on stdout.
import { base, withConsole } from "./session.mjs";

const out = { listButtons: [], listNotes: [], pages: {}, measure: { chars: 0, undrawn: 0, outside: 0, below: 0, closed: 0, samples: [] }, flashes: [] };

const measure = (page) => page.evaluate(() => {
  const vw = document.documentElement.clientWidth;
  const r = { chars: 0, undrawn: 0, outside: 0, below: 0, closed: 0, samples: [] };
  for (const sec of document.querySelectorAll("section.dead")) {
    const button = sec.querySelector("form.redrive button");
    if (!button) continue;
    for (const d of sec.querySelectorAll("details")) if (!d.open) r.closed++;
    const top = button.getBoundingClientRect().top;
    for (const box of sec.querySelectorAll(".args, table.headers")) {
      const w = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
      let n;
      while ((n = w.nextNode())) {
        for (let i = 0; i < n.data.length; i++) {
          if (n.data.charCodeAt(i) >= 0xdc00 && n.data.charCodeAt(i) <= 0xdfff) continue;
          if (n.data[i] === "\n") continue;
          r.chars++;
          const rg = document.createRange();
          rg.setStart(n, i);
          rg.setEnd(n, Math.min(n.data.length, i + (n.data.codePointAt(i) > 0xffff ? 2 : 1)));
          const rects = [...rg.getClientRects()].filter((b) => b.width > 0);
          if (rects.length === 0) { r.undrawn++; if (r.samples.length < 10) r.samples.push("undrawn " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); continue; }
          const b = rects[0];
          if (b.left < -0.5 || b.right > vw + 0.5) { r.outside++; if (r.samples.length < 10) r.samples.push("outside " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); }
          if (b.bottom > top + 0.5) { r.below++; if (r.samples.length < 10) r.samples.push("below " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); }
        }
      }
    }
  }
  return r;
});
const add = (m) => { for (const k of ["chars", "undrawn", "outside", "below", "closed"]) out.measure[k] += m[k]; out.measure.samples.push(...m.samples.slice(0, 5)); };

await withConsole(out, async (page) => {
  await page.goto(base + "/dead");
  add(await measure(page));
  const seqs = await page.evaluate(() => [...document.querySelectorAll("section.dead")].map((s) => ({
    seq: s.dataset.seq, button: !!s.querySelector("form.redrive button"), note: !!s.querySelector(".noredrive"),
  })));
  out.listButtons = seqs.filter((s) => s.button).map((s) => s.seq);
  out.listNotes = seqs.filter((s) => s.note).map((s) => s.seq);
  // Every letter's own page: measured, and re-driven where offered.
  for (const s of seqs) {
    await page.goto(base + "/dead/letter?seq=" + s.seq);
    add(await measure(page));
    const button = await page.$("form.redrive button");
    out.pages[s.seq] = !!button;
    if (button) {
      await Promise.all([page.waitForNavigation(), button.click()]);
      out.flashes.push(await page.evaluate(() => (document.querySelector(".flash") || {}).textContent || ""));
    }
  }
});
