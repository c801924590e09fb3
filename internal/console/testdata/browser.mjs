// Drives the console in Debian's Chromium with playwright-core, for
// TestBrowser (browser_test.go), which starts the worker, the console and
// a cross-site page, and checks what this script reports on stdout.
import { createRequire } from "node:module";
const require = createRequire(process.env.CONSOLE_NPM_DIR + "/");
const { chromium } = require("playwright-core");

const base = process.env.CONSOLE_URL, token = process.env.CONSOLE_TOKEN, shots = process.env.CONSOLE_SHOTS;
const evil = process.env.CONSOLE_EVIL_URL;
const out = { dialogs: [], steps: [] };
const step = (s) => { out.steps.push(s); process.stderr.write("browser: " + s + "\n"); };

const browser = await chromium.launch({ executablePath: process.env.CONSOLE_CHROMIUM, args: ["--no-sandbox"] });
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.on("dialog", async (d) => { out.dialogs.push(d.message()); await d.dismiss(); });

  // No session: refused, with the login form.
  let resp = await page.goto(base + "/approvals");
  out.unauthStatus = resp.status();
  out.unauthShowsCall = (await page.content()).includes("deploy");
  resp = await page.goto(base + "/api/live");
  out.unauthAPIStatus = resp.status();
  await page.goto(base + "/login?token=" + encodeURIComponent(token));
  await page.fill("#name", "Ada Operator");
  await page.screenshot({ path: shots + "/login.png" });
  step("login");
  await page.click("#login");
  await page.waitForLoadState();
  if (!page.url().endsWith("/approvals")) throw new Error("login went to " + page.url() + ": " + (await page.locator("body").innerText()));

  // The hostile arguments are text: no element, no alert.
  await page.waitForSelector("section.step");
  out.imgElements = await page.locator("main img").count();
  out.scriptElements = await page.locator("script").count();
  out.argsText = await page.locator("fieldset[data-call='c2'] .args").innerText();
  await page.screenshot({ path: shots + "/approvals.png", fullPage: true });
  step("approvals");

  // An action without the CSRF token, from the page itself: refused.
  out.noCSRFStatus = await page.evaluate(async () => {
    const body = new URLSearchParams({ agent_id: "a1", turn_id: "t1", step: "0", "call.0": "c1", "decision.0": "approve", "call.1": "c2", "decision.1": "approve" });
    const r = await fetch("/approvals/decide", { method: "POST", body, redirect: "manual" });
    return r.status;
  });
  // The same from another origin, with the session cookie: refused.
  const evilPage = await ctx.newPage();
  const evilResp = evilPage.waitForResponse((r) => r.url().startsWith(base + "/approvals/decide"));
  await evilPage.goto(evil);
  out.crossSiteStatus = (await evilResp).status();
  await evilPage.close();
  step("refusals");

  // The live page, open before the decision, sees the output arrive.
  const live = await ctx.newPage();
  await live.goto(base + "/live?agent=a1");
  await live.waitForFunction(() => document.getElementById("live-state").textContent === "live");

  await page.reload();
  await page.check("fieldset[data-call='c1'] input.approve");
  await page.fill("fieldset[data-call='c2'] .reason input", "no pings today");
  out.rejectChecked = await page.isChecked("fieldset[data-call='c2'] input.reject");
  await Promise.all([page.waitForURL((u) => u.pathname === "/approvals"), page.click("button.send")]);
  out.flash = await page.locator("#flash").innerText();
  step("decided");

  await live.waitForSelector("tr.output.step\\.done", { timeout: 30000 });
  out.liveRows = await live.locator("#events tr").count();
  out.liveText = await live.locator("#events").innerText();
  await live.screenshot({ path: shots + "/live.png", fullPage: true });
  step("live");

  await page.reload();
  out.recent = await page.locator("table.audit").innerText();
  await page.goto(base + "/dead");
  out.deadText = await page.locator("main").innerText();
  out.deadImg = await page.locator("main img").count();
  await page.screenshot({ path: shots + "/dead.png", fullPage: true });
  step("dead");

  await page.goto(base + "/fleet");
  out.fleetText = await page.locator("main").innerText();
  await page.screenshot({ path: shots + "/fleet.png", fullPage: true });
  step("fleet");
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(out));
