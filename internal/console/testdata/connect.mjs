// Drives the connect page in Chromium, for TestBrowserConnect
// (connect_browser_test.go): logs in, connects tenant-A's account of acct
// through the authorization server and back, then, when CONNECT_REFUSED
// is set, meets the authorization server's refusal. Reports on stdout.
import { base, withConsole } from "./session.mjs";

const out = { dialogs: [] };
await withConsole(out, async (page) => {
  await page.goto(base + "/connect?key=fair:tenant-A");
  out.before = await page.locator("table.connect").innerText();
  await Promise.all([page.waitForSelector("#authorize"), page.click("button[name=connect]")]);
  out.linkHost = await page.locator("#authorize").innerText();
  await Promise.all([page.waitForLoadState(), page.click("#authorize")]);
  await page.waitForSelector("#connected, #failed");
  out.callbackURL = page.url();
  out.callback = await page.locator("main").innerText();
  out.scripts = await page.locator("script").count();
  out.imgs = await page.locator("img").count();
  await Promise.all([page.waitForSelector("table.connect, p.empty"), page.click("main a")]);
  out.after = await page.locator("main").innerText();
  if (process.env.CONSOLE_SHOTS) {
    await page.screenshot({ path: process.env.CONSOLE_SHOTS + "/connect.png", fullPage: false });
  }
}, (page) => page.on("dialog", async (d) => { out.dialogs.push(d.message()); await d.dismiss(); }));
