// Drives the playground page in headless Chromium against tests/examples/task_server.rs:
// argv = server base URL. A task tool is called as an MCP task: the page shows its status and
// status message while it runs, cancels it, and shows a finished task's value.
// Exits non-zero, with what it saw, when the page does not behave.
import { fail, withPage } from "./page.mjs";

const [base] = process.argv.slice(2);

await withPage(base, async (page) => {
  await page.waitForSelector('nav button[data-id="Jobs.Hold@1.0.0"] .badge.task', { timeout: 10000 });

  // A task that holds until cancelled: its status and message, then the page cancels it.
  await page.click('nav button[data-id="Jobs.Hold@1.0.0"]');
  await page.click("#call");
  await page.waitForSelector("#task-status", { timeout: 10000 });
  await page.waitForFunction(() => document.querySelector("#task-message")?.textContent === "1/1: holding",
    null, { timeout: 30000 });
  if ((await page.textContent("#task-status")) !== "working") fail("a held task is not working");
  console.log("running status: ok");
  await page.click("#cancel-task");
  await page.waitForFunction(() => document.querySelector("#task-status")?.textContent === "cancelled",
    null, { timeout: 30000 });
  console.log("cancel: ok");

  // A task that completes: its value.
  await page.click('nav button[data-id="Jobs.Count@1.0.0"]');
  await page.fill('[data-path="/steps"] input', "2");
  await page.fill('[data-path="/step_ms"] input', "10");
  await page.click("#call");
  await page.waitForSelector("#result.success", { timeout: 30000 });
  const value = await page.textContent("#value");
  if (!value.startsWith("counted to 2 (run")) fail(`the value is ${value}`);
  console.log("result: ok");
});
