// What the console's browser scripts share: Chromium from the
// playwright-core in CONSOLE_NPM_DIR, the console at CONSOLE_URL, and a
// page logged in with CONSOLE_TOKEN (runBrowser in browser_test.go sets
// them). browser.mjs logs in by itself: logging in is what it tests.
import { createRequire } from "node:module";
const require = createRequire(process.env.CONSOLE_NPM_DIR + "/");
const { chromium } = require("playwright-core");

export const base = process.env.CONSOLE_URL, token = process.env.CONSOLE_TOKEN;

// withConsole launches Chromium, opens a page (prepare(page) runs
// before it loads anything), logs in as Ada Operator, runs body(page),
// closes the browser however body ends, and writes out on stdout as
// JSON.
export async function withConsole(out, body, prepare = () => {}) {
  const browser = await chromium.launch({ executablePath: process.env.CONSOLE_CHROMIUM, args: ["--no-sandbox"] });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
    prepare(page);
    await page.goto(base + "/login?token=" + encodeURIComponent(token));
    await page.fill("#name", "Ada Operator");
    await Promise.all([page.waitForURL((u) => u.pathname === "/approvals"), page.click("#login")]);
    await body(page);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out));
}
