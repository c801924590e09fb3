// Drives the approvals page in Chromium with hostile held calls, for
// TestBrowserHostile (browser_hostile_test.go): reads what a person sees
// of each, approves them through the page, and reports on stdout.
import { base, withConsole } from "./session.mjs";

const out = { shown: {}, rawHidden: [], flashes: [] };
// Characters a browser draws as nothing or elsewhere: none may be in the
// page's rendered text (the markers name them instead).
const hiddenRe = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u00a0\u00ad\u061c\u115f\u1160\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]|[\u{E0000}-\u{E007F}\u{E0100}-\u{E01EF}]/gu;

// paintProblems runs in the page: what a held step's arguments could
// paint over or push away. (1) Every Approve, Reject and Send control,
// scrolled into view, is the element hit at its centre and its corners
// (nothing covers it) and lies inside the viewport's width (the page has
// no horizontal scroll). (2) Every drawn character of the arguments and
// of every marker lies inside its argument block, and every argument
// block and marker clips its paint (overflow: clip or contain: paint), so
// that ink drawn beyond a glyph's box (a stack of marks, a glyph wider
// than its advance) stays in it: a step's text cannot draw over another
// step or the header.
function paintProblems() {
  const bad = [];
  const name = (el) => el.closest("section.step").dataset.turn + " " + el.tagName.toLowerCase() + "." + el.className;
  const within = (r, c) => r.left >= c.left - 0.5 && r.right <= c.right + 0.5 && r.top >= c.top - 0.5 && r.bottom <= c.bottom + 0.5;
  const clips = (el) => {
    const cs = getComputedStyle(el);
    const clip = cs.overflowX === "clip" && cs.overflowY === "clip" || /paint|strict|content/.test(cs.contain);
    return clip && cs.display !== "inline";
  };
  if (document.documentElement.scrollWidth > window.innerWidth) {
    bad.push(`the page scrolls sideways: ${document.documentElement.scrollWidth} px wide in ${window.innerWidth}`);
  }
  const header = document.querySelector("header").getBoundingClientRect();
  for (const el of document.querySelectorAll("section.step input.approve, section.step input.reject, section.step button.send")) {
    el.scrollIntoView({ block: "center", inline: "nearest" });
    const r = el.getBoundingClientRect();
    if (r.left < 0 || r.right > window.innerWidth || r.width === 0) {
      bad.push(`${name(el)} out of view: ${r.left}..${r.right} of ${window.innerWidth}`);
      continue;
    }
    // The corners inset past a rounded border (a radio is hit as a
    // circle, a button's corners are rounded).
    const d = Math.min(5, Math.min(r.width, r.height) * 0.3);
    for (const [x, y] of [[(r.left + r.right) / 2, (r.top + r.bottom) / 2], [r.left + d, r.top + d], [r.right - d, r.top + d], [r.left + d, r.bottom - d], [r.right - d, r.bottom - d]]) {
      const hit = document.elementFromPoint(x, y);
      if (!hit || !(hit === el || el.contains(hit))) {
        bad.push(`${name(el)} covered at ${x},${y} by ${hit && hit.tagName + "." + hit.className}`);
        break;
      }
    }
  }
  window.scrollTo(0, 0);
  for (const args of document.querySelectorAll("section.step .args")) {
    if (!clips(args)) bad.push(`${name(args)} does not clip its paint`);
    const c = args.getBoundingClientRect();
    const section = args.closest("section.step").getBoundingClientRect();
    if (!within(c, section)) bad.push(`${name(args)} outside its step`);
    const walk = document.createTreeWalker(args, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        if (!within(r, c)) { bad.push(`${name(args)}: text ${JSON.stringify(n.data.slice(0, 40))} drawn outside its block`); break; }
      }
    }
  }
  for (const m of document.querySelectorAll("section.step .mark")) {
    if (!clips(m)) { bad.push(`${name(m)} does not clip its paint`); break; }
  }
  for (const s of document.querySelectorAll("section.step")) {
    const r = s.getBoundingClientRect();
    if (r.top < header.bottom - 0.5 && window.scrollY === 0 && r.bottom > header.top) bad.push(`step ${s.dataset.turn} under the header`);
  }
  return bad;
}

await withConsole(out, async (page) => {
  for (const m of (await page.locator("main").innerText()).matchAll(hiddenRe)) {
    out.rawHidden.push(m[0].codePointAt(0).toString(16));
  }
  const turns = ["bidi", "invis", "tail", "ctl", "wide", "zalgo", "emoji", "token", "rtl"];
  for (const turn of turns) {
    out.shown[turn] = await page.locator(`section[data-turn='${turn}'] fieldset.held .args`).innerText();
  }
  out.closedFolds = await page.locator("section.step details:not([open])").count();
  out.scrollBoxes = await page.evaluate(() => [...document.querySelectorAll("section.step .args")].filter((e) => e.scrollHeight > e.clientHeight + 2).length);
  out.tailVisible = await page.locator("section[data-turn='tail']").getByText("TAILMARK").isVisible();
  out.hugeApprove = await page.locator("section[data-turn='huge'] input.approve").count();
  out.hugeTailOnList = (await page.locator("section[data-turn='huge']").innerText()).includes("HUGETAIL");
  await page.screenshot({ path: process.env.CONSOLE_SHOTS + "/hostile.png", fullPage: false });

  // No combining mark reaches the rendered text: each is named, so that
  // none can stack on a neighbour and draw over other lines.
  out.drawnMarks = [...(await page.locator("main").innerText()).matchAll(/\p{M}/gu)].length;
  out.paint = await page.evaluate(paintProblems);
  await page.screenshot({ path: process.env.CONSOLE_SHOTS + "/paint.png", fullPage: true });

  // Each step approved through the page.
  for (const turn of turns) {
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
});
