// Drives the approvals page in Chromium with run_command and write_file
// calls held by a real worker, for TestBrowserComputer
// (computer_browser_test.go): for each held step it reads what a person
// sees of its arguments, finds characters drawn as they are outside
// printable ASCII, measures whether every character is drawn inside the
// viewport above its Approve, approves each through the page, and
// reports on stdout.
import { base, withConsole } from "./session.mjs";

const turns = process.env.CONSOLE_TURNS.split(",");
const out = { shown: {}, leaks: [], measure: null, flashes: [] };

await withConsole(out, async (page) => {
  out.leaks = await page.evaluate(() => {
    const bad = [];
    const w = document.createTreeWalker(document.querySelector("main"), NodeFilter.SHOW_TEXT);
    let n;
    while ((n = w.nextNode())) {
      if (n.parentElement.closest(".mark, .leftout")) continue;
      for (const ch of n.data) {
        const c = ch.codePointAt(0);
        if (c !== 10 && (c < 0x20 || c > 0x7e) && c !== 0xb7 && c !== 0x2026) bad.push(c.toString(16));
      }
    }
    return bad;
  });
  out.measure = await page.evaluate(() => {
    const vw = document.documentElement.clientWidth;
    const r = { chars: 0, undrawn: 0, outside: 0, small: 0, argsBelowApprove: 0, samples: [] };
    for (const f of document.querySelectorAll("section.step fieldset.held")) {
      const args = f.querySelector(".args"), approve = f.querySelector("input.approve");
      if (!approve || args.getBoundingClientRect().bottom > approve.getBoundingClientRect().top) r.argsBelowApprove++;
      const w = document.createTreeWalker(args, NodeFilter.SHOW_TEXT);
      let n;
      while ((n = w.nextNode())) {
        const cs = getComputedStyle(n.parentElement);
        const small = parseFloat(cs.fontSize) < 9 || cs.color === cs.backgroundColor || cs.visibility !== "visible";
        for (let i = 0; i < n.data.length; i++) {
          if (n.data.charCodeAt(i) >= 0xdc00 && n.data.charCodeAt(i) <= 0xdfff) continue;
          r.chars++;
          if (small) r.small++;
          const rg = document.createRange();
          rg.setStart(n, i);
          rg.setEnd(n, Math.min(n.data.length, i + (n.data.codePointAt(i) > 0xffff ? 2 : 1)));
          const rects = [...rg.getClientRects()].filter((b) => b.width > 0 || n.data[i] === "\n");
          if (rects.length === 0) { r.undrawn++; if (r.samples.length < 10) r.samples.push("undrawn " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); continue; }
          for (const b of rects) {
            if (b.left < -0.5 || b.right > vw + 0.5) { r.outside++; if (r.samples.length < 10) r.samples.push("outside " + JSON.stringify(n.data.slice(Math.max(0, i - 10), i + 10))); break; }
          }
        }
      }
    }
    return r;
  });
  for (const turn of turns) {
    for (const f of await page.locator(`section[data-turn='${turn}'] fieldset.held`).all()) {
      out.shown[await f.getAttribute("data-call")] = await f.locator(".args").innerText();
    }
  }
  for (const turn of turns) {
    for (const a of await page.locator(`section[data-turn='${turn}'] fieldset.held input.approve`).all()) await a.check();
    await Promise.all([page.waitForURL((u) => u.pathname === "/approvals"), page.click(`section[data-turn='${turn}'] button.send`)]);
    out.flashes.push(await page.locator("#flash").innerText());
  }
});
