// Drives the console in Chromium with held calls, an input request and a
// dead letter whose values hold look-alike letters and characters that
// change how others look, for TestBrowserLookalikes
// (lookalike_browser_test.go): on the list, the step's own page, the live
// page, the dead letters and the audit table it reads what a person sees,
// finds every character drawn as it is outside printable ASCII, measures
// where each character of the held arguments is drawn, approves through
// the page, and reports on stdout.
import { base, withConsole } from "./session.mjs";

const out = { shown: {}, leaks: {}, measure: {}, styles: {}, flashes: [] };

// leaks: the characters outside printable ASCII drawn as they are (not
// inside a marker) in the text of the elements sel finds. The page's own
// separators (·, …) are not values.
const leaks = (page, sel) => page.evaluate((sel) => {
  const bad = [];
  for (const root of document.querySelectorAll(sel)) {
    const w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    let n;
    while ((n = w.nextNode())) {
      if (n.parentElement.closest(".mark, .leftout")) continue;
      for (const ch of n.data) {
        const c = ch.codePointAt(0);
        if (c !== 10 && (c < 0x20 || c > 0x7e) && c !== 0xb7 && c !== 0x2026) bad.push(c.toString(16));
      }
    }
  }
  return bad;
}, sel);

// measure: for every character of the held calls' arguments, whether it
// is drawn (a box of its own), inside the viewport's width, not clipped
// or hidden by an ancestor's style, and above its call's Approve.
const measure = (page) => page.evaluate(() => {
  const vw = document.documentElement.clientWidth;
  const r = { chars: 0, undrawn: 0, outside: 0, hiddenByStyle: 0, clippers: 0, argsBelowApprove: 0, samples: [] };
  for (const f of document.querySelectorAll("section.step fieldset.held")) {
    const args = f.querySelector(".args"), approve = f.querySelector("input.approve");
    if (approve && args.getBoundingClientRect().bottom > approve.getBoundingClientRect().top) r.argsBelowApprove++;
    for (let a = args; a && a !== document.body; a = a.parentElement) {
      const cs = getComputedStyle(a);
      // A box may clip its paint (overflow: clip, contain: paint: a
      // glyph's ink cannot spill over other text) only if every
      // character lies inside it, checked below; any other hiding style
      // is a clipper.
      if (cs.overflowX !== "visible" && cs.overflowX !== "clip" || cs.overflowY !== "visible" && cs.overflowY !== "clip" || cs.textOverflow !== "clip" || cs.display === "none" ||
          cs.visibility !== "visible" || parseFloat(cs.opacity) < 1 || cs.maxHeight !== "none") r.clippers++;
    }
    const w = document.createTreeWalker(args, NodeFilter.SHOW_TEXT);
    let n;
    while ((n = w.nextNode())) {
      const cs = getComputedStyle(n.parentElement);
      const small = parseFloat(cs.fontSize) < 9 || cs.color === cs.backgroundColor;
      for (let i = 0; i < n.data.length; i++) {
        if (n.data.charCodeAt(i) >= 0xdc00 && n.data.charCodeAt(i) <= 0xdfff) continue; // second half of a pair
        r.chars++;
        if (small) r.hiddenByStyle++;
        const rg = document.createRange();
        rg.setStart(n, i);
        rg.setEnd(n, Math.min(n.data.length, i + (n.data.codePointAt(i) > 0xffff ? 2 : 1)));
        const rects = [...rg.getClientRects()].filter((b) => b.width > 0 || n.data[i] === "\n");
        if (rects.length === 0) { r.undrawn++; if (r.samples.length < 10) r.samples.push("undrawn " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); continue; }
        const clips = [];
        for (let a = n.parentElement; a && a !== document.body; a = a.parentElement) {
          const cs = getComputedStyle(a);
          if (cs.overflowX !== "visible" || cs.overflowY !== "visible" || /paint|strict|content/.test(cs.contain)) clips.push(a.getBoundingClientRect());
        }
        for (const b of rects) {
          if (clips.some((c) => b.left < c.left - 0.5 || b.right > c.right + 0.5 || b.top < c.top - 0.5 || b.bottom > c.bottom + 0.5)) {
            r.clippers++; if (r.samples.length < 10) r.samples.push("clipped " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); break;
          }
          if (b.left < -0.5 || b.right > vw + 0.5) { r.outside++; if (r.samples.length < 10) r.samples.push("outside " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); break; }
        }
      }
    }
  }
  return r;
});

await withConsole(out, async (page) => {

  out.leaks.list = await leaks(page, "main");
  for (const turn of ["look", "ws"]) {
    out.shown[turn] = await page.locator(`section[data-turn='${turn}'] fieldset.held .args`).innerText();
  }
  out.shown.input = await page.locator("section[data-turn='in1']").innerText();
  out.scriptNote = await page.locator("section[data-turn='look'] p.script").innerText();
  out.measure.list = await measure(page);
  out.styles = await page.evaluate(() => {
    const ln = getComputedStyle(document.querySelector("section[data-turn='ws'] .args .ln"));
    const v = getComputedStyle(document.querySelector("section .vis"));
    return { ligatures: ln.fontVariantLigatures, features: ln.fontFeatureSettings, lnSpace: ln.whiteSpace, visSpace: v.whiteSpace };
  });

  // The step's own page.
  await page.goto(base + "/approvals/step?agent=a1&turn=look&step=0");
  out.leaks.step = await leaks(page, "main");
  out.shown.step = await page.locator("section[data-turn='look'] fieldset.held .args").innerText();
  out.measure.step = await measure(page);
  // A narrow window (a phone's): every character still inside it.
  await page.setViewportSize({ width: 420, height: 900 });
  out.measure.narrow = await measure(page);
  await page.setViewportSize({ width: 1280, height: 900 });

  // The live page: the held steps' step.pending events, replayed.
  await page.goto(base + "/live?agent=a1");
  await page.locator("#events tr").first().waitFor({ timeout: 30000 });
  await page.waitForTimeout(1500);
  for (const d of await page.locator("#events details").all()) await d.evaluate((e) => { e.open = true; });
  out.leaks.live = await leaks(page, "#events");
  out.shown.live = await page.locator("#events").innerText();

  // The dead letters.
  await page.goto(base + "/dead");
  for (const d of await page.locator("details").all()) await d.evaluate((e) => { e.open = true; });
  out.leaks.dead = await leaks(page, "main");
  out.shown.dead = await page.locator("main").innerText();

  // Approve through the list; then the audit table.
  await page.goto(base + "/approvals");
  for (const turn of ["look", "ws"]) {
    await page.check(`section[data-turn='${turn}'] fieldset.held input.approve`);
    await page.fill(`section[data-turn='${turn}'] fieldset.held .reason input`, "ok \u0430\u202e");
    await page.check(`section[data-turn='${turn}'] fieldset.held input.approve`);
    await Promise.all([page.waitForURL((u) => u.pathname === "/approvals"), page.click(`section[data-turn='${turn}'] button.send`)]);
    out.flashes.push(await page.locator("#flash").innerText());
  }
  out.leaks.audit = await leaks(page, "table.audit");
  out.shown.audit = await page.locator("table.audit").innerText();
  await page.screenshot({ path: process.env.CONSOLE_SHOTS + "/lookalike.png", fullPage: false });
});
