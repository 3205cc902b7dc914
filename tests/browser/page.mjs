// What every browser test here starts with: headless Chromium (Debian's, or OXP_CHROMIUM) on a
// page of `base` whose script errors fail the run, and `fail`, which marks the run failed with
// what it saw.
import { chromium } from "playwright-core";

export const fail = (message) => { console.error("FAIL: " + message); process.exitCode = 1; };

// Runs `steps(page)` on the playground at `base`, closing the browser whatever happens.
export async function withPage(base, steps) {
  const browser = await chromium.launch({
    executablePath: process.env.OXP_CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on("pageerror", (error) => fail("page error: " + error.message));
    await page.goto(base + "/");
    await steps(page);
  } finally {
    await browser.close();
  }
}
