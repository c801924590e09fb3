// Reads the live page in Chromium for TestBrowserLiveShowsTheBytes
// (live_browser_test.go): waits for the rows of the hostile call.output
// and activity the test publishes, opens every row's JSON, and reports
// on stdout what a person reads of each row (its cells and its JSON),
// and every character outside printable ASCII drawn as it is rather
// than inside a marker.
import { base, withConsole } from "./session.mjs";

const out = { rows: [], leaks: [] };
await withConsole(out, async (page) => {
  await page.goto(base + "/live?agent=hl");
  await page.waitForSelector("#events tr.output", { timeout: 60000 });
  await page.waitForSelector("#events tr.activity", { timeout: 60000 });
  Object.assign(out, await page.evaluate(() => {
    const rows = [], leaks = [];
    for (const d of document.querySelectorAll("#events details")) d.open = true;
    for (const tr of document.querySelectorAll("#events tr")) {
      const tds = [...tr.children];
      rows.push({ cls: tr.className, cells: tds.slice(1, 7).map((td) => td.innerText), json: [...tds[7].querySelector("details").children].filter((c) => c.tagName !== "SUMMARY").map((c) => c.innerText).join("\n") });
      const w = document.createTreeWalker(tr, NodeFilter.SHOW_TEXT);
      let n;
      while ((n = w.nextNode())) {
        if (n.parentElement.closest(".mark, .leftout")) continue;
        for (const ch of n.data) {
          const c = ch.codePointAt(0);
          if ((c < 0x20 || c > 0x7e) && c !== 0xb7 && c !== 0x2026) leaks.push(c.toString(16));
        }
      }
    }
    return { rows, leaks };
  }));
  await page.screenshot({ path: process.env.CONSOLE_SHOTS + "/live.png" });
});
