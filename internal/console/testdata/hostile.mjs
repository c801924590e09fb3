// Drives the approvals page in Chromium with hostile held calls, for
// TestBrowserHostile (browser_hostile_test.go): reads what a person sees
// of each, approves them through the page, and reports on stdout.
import { createRequire } from "node:module";
const require = createRequire(process.env.CONSOLE_NPM_DIR + "/");
const { chromium } = require("playwright-core");

const base = process.env.CONSOLE_URL, token = process.env.CONSOLE_TOKEN;
const out = { shown: {}, rawHidden: [], flashes: [] };
// Characters a browser draws as nothing or elsewhere: none may be in the
// page's rendered text (the markers name them instead).
const hiddenRe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00a0\u00ad\u061c\u115f\u1160\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]|[\u{E0000}-\u{E007F}\u{E0100}-\u{E01EF}]/gu;

const browser = await chromium.launch({ executablePath: process.env.CONSOLE_CHROMIUM, args: ["--no-sandbox"] });
try {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await page.goto(base + "/login?token=" + encodeURIComponent(token));
  await page.fill("#name", "Ada Operator");
  await Promise.all([page.waitForURL((u) => u.pathname === "/approvals"), page.click("#login")]);
  for (const m of (await page.locator("main").innerText()).matchAll(hiddenRe)) {
    out.rawHidden.push(m[0].codePointAt(0).toString(16));
  }
  for (const turn of ["bidi", "invis", "tail", "ctl"]) {
    out.shown[turn] = await page.locator(`section[data-turn='${turn}'] fieldset.held .args`).innerText();
  }
  out.closedFolds = await page.locator("section.step details:not([open])").count();
  out.scrollBoxes = await page.evaluate(() => [...document.querySelectorAll("section.step .args")].filter((e) => e.scrollHeight > e.clientHeight + 2).length);
  out.tailVisible = await page.locator("section[data-turn='tail']").getByText("TAILMARK").isVisible();
  out.hugeApprove = await page.locator("section[data-turn='huge'] input.approve").count();
  out.hugeTailOnList = (await page.locator("section[data-turn='huge']").innerText()).includes("HUGETAIL");
  await page.screenshot({ path: process.env.CONSOLE_SHOTS + "/hostile.png", fullPage: false });

  // Each step approved through the page.
  for (const turn of ["bidi", "invis", "tail", "ctl"]) {
    await page.check(`section[data-turn='${turn}'] fieldset.held input.approve`);
    await Promise.all([page.waitForURL((u) => u.pathname === "/approvals"), page.click(`section[data-turn='${turn}'] button.send`)]);
    out.flashes.push(await page.locator("#flash").innerText());
  }
  // The huge one, from its own page, where all of it is shown.
  await Promise.all([page.waitForLoadState(), page.click("section[data-turn='huge'] a.open-step")]);
  out.hugeStepApprove = await page.locator("section[data-turn='huge'] input.approve").count();
  out.hugeTailOnStep = await page.locator("section[data-turn='huge']").getByText("HUGETAIL").isVisible();
  await page.check("section[data-turn='huge'] fieldset.held input.approve");
  await Promise.all([page.waitForURL((u) => u.pathname === "/approvals"), page.click("section[data-turn='huge'] button.send")]);
  out.flashes.push(await page.locator("#flash").innerText());
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
